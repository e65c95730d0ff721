/**
 * The bulk path of a campaign send job (decision 0178): the emails of one job, claimed ahead together, go to SES
 * in `SendBulkEmail` calls of up to {@link BULK_MAX_ENTRIES} entries (`ses/bulk-send.ts`), each email rendered by
 * Mailroom's renderer as it would be for `SendEmail`. Each email keeps its own row, claim and outcome:
 *
 * 1. Each is claimed and checked as on its own (`job-steps.ts`: kept outcome, erased, disabled, cancelled,
 *    suppressed, route, campaign quota) and rendered (`renderEmail`). An email that cannot be composed fails on its
 *    own.
 * 2. The ready ones that share what a call carries once (sender, Reply-To, configuration set, delivery connection)
 *    go in one call; an email alone in its call, or one SES could not build as ours (`bulkEligible`), or a test
 *    email, goes by `SendEmail` with raw content.
 * 3. Each entry's result is its email's: a message id is recorded as `sent` (kept in Redis when Postgres cannot
 *    take it: `ses-accepted.ts`), a failed entry is classified on its own (throttled, rejected, transient). An error
 *    for the whole call is each entry's (an unreachable SES counted once); a call SES refused as a whole (4xx) is
 *    sent again one email at a time, so one entry SES would refuse never fails the others. A call refused for want
 *    of permission (`AccessDeniedException`: the IAM policy lacks `ses:SendBulkEmail`) also turns the bulk path off
 *    in this process for {@link BULK_DENIED_PAUSE_MS}, logged once, so campaign mail goes on one email at a time.
 *
 * The rate gate grants one send per entry before the call is written, all confirmed when its last byte has left
 * (`ses/rate-gate.ts`). A call whose answer is lost leaves each of its entries in doubt, and they are sent again
 * after their retry: at most the emails of one job, about 50 ms of sending at the configured rate
 * (`CAMPAIGN_JOB_EMAILS`, decision 0171).
 *
 * @module
 */
import type { Logger } from '@mailroom/platform/logger';
import { classifySendError, type MailTransport } from './ses/transport';
import {
  BULK_MAX_ENTRIES,
  bulkEligible,
  mailboxHeader,
  type BulkEntry,
  wholeCallFailed,
  type BulkEntryOutcome,
  type BulkOutbound,
} from './ses/bulk-send';
import type { ClaimResult } from './claim';
import { renderEmail } from './compose';
import { sesTags, type PreparedSend, type SendSteps } from './job-steps';
import type { EmailSenderDeps, SendJobInput, SendStep } from './job';

/** How long (ms) a process sends campaign mail one email at a time after SES denied it `SendBulkEmail`. */
export const BULK_DENIED_PAUSE_MS = 10 * 60_000;

/** What the bulk path needs of the sender. */
export interface BulkSenderDeps {
  config: EmailSenderDeps['config'];
  transport: Required<Pick<MailTransport, 'sendBulk'>>;
  steps: SendSteps;
  /** The claim of an email: taken ahead, else now. */
  claim: (emailId: string) => Promise<ClaimResult>;
  /** Sends one prepared email on its own (`SendEmail` with raw content, or the test sink). */
  deliver: (p: PreparedSend) => Promise<SendStep>;
}

/** A prepared email rendered for its bulk entry. */
interface Entry {
  p: PreparedSend;
  entry: BulkEntry;
  subject: string;
}

/**
 * `step`, or a `retry` step when it throws (the database failed mid-way: this email's attempt failed, as a
 * one-email job's would; the others of the job go on).
 */
async function orRetry(input: SendJobInput, step: () => Promise<SendStep>): Promise<SendStep> {
  try {
    return await step();
  } catch (err) {
    return retryStep(input, err);
  }
}

/** The `retry` step of an email whose attempt failed with `err` (logged). */
function retryStep(input: SendJobInput, err: unknown): SendStep {
  input.log.warn({ err: (err as Error).message }, 'send attempt failed; retried in a job of its own');
  return { kind: 'retry', error: err instanceof Error ? err : new Error(String(err)) };
}

/**
 * Creates the sender of several emails of one job (see the module notes).
 * @returns for each input, in order, its step.
 * @throws nothing of one email's: an email whose claim, checks or finish threw gets a `retry` step with the error.
 */
export function createBulkSender(deps: BulkSenderDeps): (inputs: SendJobInput[]) => Promise<SendStep[]> {
  const { steps } = deps;
  /** Until when (epoch ms) SES is taken to deny this process `SendBulkEmail` (see the module notes). */
  let deniedUntil = 0;

  /**
   * Sends `ps` one at a time through `SendEmail`, in order: after a step that stops the job (throttled, unreachable,
   * paused, at its rate) the rest are not tried; each goes back to `queued` and takes that step too, so it waits as
   * long (as `runSendBatch` does with the emails after a stop).
   */
  const oneByOne = async (ps: readonly PreparedSend[]): Promise<SendStep[]> => {
    const out: SendStep[] = [];
    let stop: SendStep | undefined;
    for (const p of ps) {
      if (stop) {
        const step = stop;
        out.push(
          await orRetry(p.input, async () => {
            await p.finish({ status: 'queued', reason: 'not sent yet: an email before it was stopped' });
            return step;
          }),
        );
        continue;
      }
      const step = await orRetry(p.input, () => deps.deliver(p));
      if (step.kind === 'back-off' || step.kind === 'campaign-paused' || step.kind === 'yield') stop = step;
      out.push(step);
    }
    return out;
  };

  /** Sends the entries of one call and finishes each by its own result. */
  const sendCall = async (call: BulkOutbound, entries: Entry[], log: Logger): Promise<SendStep[]> => {
    let outcomes: BulkEntryOutcome[];
    try {
      outcomes = (await deps.transport.sendBulk(call)).outcomes;
    } catch (err) {
      outcomes = wholeCallFailed(entries, err);
    }
    // Refused as a whole (a 4xx; the router gives each entry the call's error): nothing of it was accepted, and
    // each email goes on its own for its own verdict.
    const refused = entries.filter((_, i) => {
      const o = outcomes[i];
      return 'error' in o && o.wholeCall && classifySendError(o.error).kind === 'permanent';
    });
    const refusedSteps = new Map<Entry, SendStep>();
    if (refused.length > 0) {
      const err = (outcomes[entries.indexOf(refused[0])] as { error: Error }).error;
      if (err.name === 'AccessDeniedException') {
        if (Date.now() >= deniedUntil)
          log.error(
            { err: err.message, forMs: BULK_DENIED_PAUSE_MS },
            'SES denied SendBulkEmail (is ses:SendBulkEmail in the IAM policy?); campaign mail goes one by one',
          );
        deniedUntil = Date.now() + BULK_DENIED_PAUSE_MS;
      } else log.warn({ err: err.message, entries: refused.length }, 'bulk call refused; sending one by one');
      const steps = await oneByOne(refused.map((e) => e.p));
      refused.forEach((e, k) => refusedSteps.set(e, steps[k]));
    }
    const counted = new Set<unknown>();
    return Promise.all(
      entries.map((e, i) => {
        const done = refusedSteps.get(e);
        if (done) return Promise.resolve(done);
        const o = outcomes[i];
        if ('messageId' in o)
          return orRetry(e.p.input, () =>
            steps.accepted(e.p, { messageId: o.messageId, subject: e.subject, connection: o.connection }),
          );
        // An unreachable SES counts once per call in the backoff.
        const sameCall = counted.has(o.error);
        counted.add(o.error);
        return orRetry(e.p.input, () => steps.sendFailed(e.p, o.error, { sameCall }));
      }),
    );
  };

  return async (inputs) => {
    const result = new Array<SendStep>(inputs.length);
    /** Calls by what their entries share (sender, Reply-To, stream, tracking, connection). */
    const calls = new Map<string, { call: BulkOutbound; entries: Entry[] }>();
    const alone: PreparedSend[] = [];
    await Promise.all(
      inputs.map(async (input, i) => {
        let p: PreparedSend;
        try {
          const prepared = await steps.prepare(input, await deps.claim(input.emailId));
          if ('step' in prepared) return void (result[i] = prepared.step);
          p = prepared.ready;
        } catch (err) {
          return void (result[i] = retryStep(input, err));
        }
        const { email } = p;
        if (email.test || email.bodyFormat === 'mime' || Date.now() < deniedUntil) return void alone.push(p);
        let rendered: ReturnType<typeof renderEmail>;
        try {
          rendered = renderEmail(deps.config, email, input.log);
        } catch (err) {
          return void (result[i] = await orRetry(input, () => steps.composeFailed(p, err)));
        }
        const { content, headers } = rendered;
        const data = JSON.stringify({ subject: content.subject, html: content.html, text: content.text });
        if (!bulkEligible(email, headers, data.length)) return void alone.push(p);
        const call: BulkOutbound = {
          from: mailboxHeader(email.fromEmail, email.fromName),
          ...(email.replyTo ? { replyTo: [email.replyTo] } : {}),
          priority: input.priority,
          connection: p.connection,
          projectId: email.projectId,
          stream: email.marketing ? 'marketing' : 'transactional',
          tracking: email.tracking,
          ...(email.trackingTarget ? { trackingDomain: email.trackingTarget } : {}),
          entries: [],
        };
        const key = JSON.stringify([
          call.from,
          call.replyTo,
          call.stream,
          call.tracking,
          call.trackingDomain,
          call.connection,
        ]);
        const group = calls.get(key) ?? calls.set(key, { call, entries: [] }).get(key)!;
        group.entries.push({
          p,
          subject: content.subject,
          entry: { to: mailboxHeader(email.toEmail, email.toName), data, headers, tags: sesTags(email), key: email.id },
        });
      }),
    );
    const index = new Map(inputs.map((input, i) => [input, i]));
    const sends: Promise<void>[] = [];
    for (const { call, entries } of calls.values()) {
      // An email alone in its call goes by SendEmail: the same cost, and its Message-ID stays ours.
      if (entries.length === 1) {
        alone.push(entries[0].p);
        continue;
      }
      // In the job's order (they were prepared concurrently).
      entries.sort((a, b) => index.get(a.p.input)! - index.get(b.p.input)!);
      for (let from = 0; from < entries.length; from += BULK_MAX_ENTRIES) {
        const chunk = entries.slice(from, from + BULK_MAX_ENTRIES);
        const log = chunk[0].p.input.log;
        sends.push(
          sendCall({ ...call, entries: chunk.map((e) => e.entry) }, chunk, log).then((s) =>
            s.forEach((step, k) => (result[index.get(chunk[k].p.input)!] = step)),
          ),
        );
      }
    }
    sends.push(oneByOne(alone).then((s) => s.forEach((step, k) => (result[index.get(alone[k].input)!] = step))));
    await Promise.all(sends);
    return result;
  };
}
