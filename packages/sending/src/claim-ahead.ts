/**
 * Claims taken ahead of their sends, for a send job carrying several emails: the job asks for its next emails'
 * claims together, so they go in one batched statement (`claim.ts`) instead of one each as its sends come, and gives
 * back the ones it does not send after all (its campaign paused, SES throttled, the slot handed to urgent mail).
 *
 * @module
 */
import { type Logger, logged } from '@mailroom/platform/logger';
import type { ClaimResult, SendBatching } from './claim';

/** The claims of one sender taken ahead (see the module notes). */
export interface ClaimsAhead {
  /** The claim taken ahead for `emailId`, removed from the set; undefined when there is none. */
  take: (emailId: string) => Promise<ClaimResult> | undefined;
  /** Asks for the claims of `emailIds` now, together; an id already asked for is not asked again. */
  claimAhead: (emailIds: readonly string[]) => void;
  /**
   * Gives back the claims taken ahead for `emailIds` and not used: each claimed row goes back to `queued` (no
   * attempt spent) with `reason`. A failure is logged (the claim then lapses with its lease, `SEND_LEASE_MS`).
   */
  release: (emailIds: readonly string[], reason: string, log: Logger) => Promise<void>;
}

/** Creates the set of claims taken ahead over `batching`. */
export function createClaimsAhead(batching: Pick<SendBatching, 'claim' | 'finish'>): ClaimsAhead {
  const ahead = new Map<string, Promise<ClaimResult>>();
  const take = (emailId: string): Promise<ClaimResult> | undefined => {
    const claim = ahead.get(emailId);
    ahead.delete(emailId);
    return claim;
  };
  return {
    take,
    claimAhead: (emailIds) => {
      for (const id of emailIds) {
        if (ahead.has(id)) continue;
        const claim = batching.claim(id);
        // Its error is the send's (or release's) to see; not an unhandled rejection meanwhile.
        claim.catch(() => undefined);
        ahead.set(id, claim);
      }
    },
    release: async (emailIds, reason, log) => {
      await Promise.all(
        emailIds.map(async (id) => {
          const claimed = await take(id)?.catch(() => undefined);
          if (!claimed?.ok) return;
          await logged(
            batching.finish(claimed.claim, { status: 'queued', reason }, log),
            log,
            'claim give-back',
            'warn',
          );
        }),
      );
    },
  };
}
