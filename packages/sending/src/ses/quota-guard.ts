/**
 * The SES 24-hour quota at the send itself: a live campaign email goes out only while the quota has room before
 * its reserve, judged when the email is about to be sent, not only at the quota watcher's next check
 * (`SES_QUOTA_CHECK_MS`, 10 s: about 140 sends at 14/s, against a small sandbox quota's reserve of 10).
 *
 * Room is `pauseAt − sent in 24 hours` (`quotaState`), less the campaign emails this process has let through that
 * are not counted yet (admitted, their `sent` write not committed). Far from the line a reading is reused: the
 * whole deployment cannot send more than the rate gate allows since it was taken (`rate × (elapsed + 1 s)`), so
 * while that leaves room no query is made. Near the line every admission reads the count afresh (one indexed sum
 * over `reputation_counts`), one at a time, so this process never lets more through than there is room for.
 * Several worker processes each count only their own uncounted sends: together they may pass the line by what the
 * others have in flight at that moment (at most `WORKER_CONCURRENCY` each).
 *
 * @module
 */
import { quotaState } from '@mailroom/mail/ses-account';
import type { AccountEstimate } from './account';

/** What the guard needs of the account watcher. */
export interface QuotaGuardAccount {
  /** The last reading plus this deployment's sends since (undefined before any reading). */
  estimate(): Promise<AccountEstimate | undefined>;
  /** The send rate in force (emails/s). */
  readonly rate: number;
}

/** An admission: room was found; call `done` once the send is final (its `sent` write committed, or it failed). */
export type QuotaAdmission = { ok: true; done: () => void } | { ok: false; remaining: number };

/** See the module notes. */
export class CampaignQuotaGuard {
  private known?: { at: number; remaining: number };
  /** Admitted here and not yet final. */
  private uncounted = 0;
  private queue: Promise<unknown> = Promise.resolve();

  /**
   * @param reserve - `SES_QUOTA_RESERVE` (fraction).
   * @param holdMs - longest an admission counts as uncounted when `done` is never called (a path that threw):
   *   `SEND_LEASE_MS`, after which the row may be claimed again anyway.
   */
  constructor(
    private readonly account: QuotaGuardAccount,
    private readonly reserve: number,
    private readonly holdMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a live campaign email may go out now (see the module notes). Never throws: without figures, yes. */
  admit(): Promise<QuotaAdmission> {
    const turn = this.queue.then(() => this.decide());
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  private async decide(): Promise<QuotaAdmission> {
    const now = this.now();
    const k = this.known;
    if (k && k.remaining - Math.ceil(this.account.rate * ((now - k.at) / 1000 + 1)) - this.uncounted > 0)
      return this.admitted();
    let estimate: AccountEstimate | undefined;
    try {
      estimate = await this.account.estimate();
    } catch {
      estimate = undefined;
    }
    // No reading yet: nothing to judge by (the quota watcher skips too).
    if (!estimate) return this.admitted();
    const { remaining } = quotaState(estimate, this.reserve);
    this.known = { at: now, remaining };
    return remaining - this.uncounted > 0
      ? this.admitted()
      : { ok: false, remaining: Math.max(0, remaining - this.uncounted) };
  }

  private admitted(): QuotaAdmission {
    this.uncounted++;
    let open = true;
    const done = () => {
      if (!open) return;
      open = false;
      clearTimeout(timer);
      this.uncounted--;
    };
    const timer = setTimeout(done, this.holdMs);
    timer.unref();
    return { ok: true, done };
  }
}
