/**
 * The bulk paths of a sender: emails go to SES in `SendBulkEmail` calls of up to {@link BULK_MAX_ENTRIES} entries
 * (`ses/bulk-send.ts`), each email rendered by Mailroom's renderer as it would be for `SendEmail`.
 *
 * - The emails of one campaign send job, claimed ahead together (`sendMany`, decision 0178).
 * - The emails of one-email jobs (transactional, workflow, campaign mail at a low rate) whose SES calls became ready
 *   in the same turn of the event loop (`sendTogether`, decision 0179): under load the concurrent jobs of a process
 *   share calls; at a low rate every email is alone and goes by `SendEmail` as before, without waiting for company.
 *
 * Each email keeps its own row, claim and outcome:
 *
 * 1. Each is claimed and checked as on its own (`job-steps.ts`: kept outcome, erased, disabled, cancelled,
 *    suppressed, route, campaign quota) and rendered (`renderEmail`). An email that cannot be composed fails on its
 *    own.
 * 2. The ready ones that share what a call carries once (sender, Reply-To, lane priority, configuration set,
 *    delivery connection) go in one call; an email alone in its call, or one SES could not build as ours
 *    (`bulkEligible`), or a test email, goes by `SendEmail` with raw content (rendered once).
 * 3. Each entry's result is its email's: a message id is recorded as `sent` (kept in Redis when Postgres cannot
 *    take it: `ses-accepted.ts`), a failed entry is classified on its own (throttled, rejected, transient). An error
 *    for the whole call is each entry's (an unreachable SES counted once); a call SES refused as a whole (4xx) is
 *    sent again one email at a time, so one entry SES would refuse never fails the others. A call refused for want
 *    of permission (`AccessDeniedException`: the IAM policy lacks `ses:SendBulkEmail`) also turns the bulk paths
 *    off in this process for {@link BULK_DENIED_PAUSE_MS}, logged once, so mail goes on one email per call.
 *
 * The rate gate grants one send per entry before the call is written, all confirmed when its last byte has left
 * (`ses/rate-gate.ts`). A call whose answer is lost leaves each of its entries in doubt, and they are sent again
 * after their retry: at most the emails of one job, about 50 ms of sending at the configured rate
 * (`CAMPAIGN_JOB_EMAILS`, decision 0171), or the one-email jobs in flight together, no more than
 * `SEND_CONCURRENCY` (as many as were in doubt before, each in its own call).
 *
 * @module
 */
import { classifySendError, type MailTransport } from './ses/transport';
import {
  BULK_MAX_ENTRIES,
  bulkEligible,
  mailboxHeader,
  type BulkEntry,
  wholeCallFailed,
  type BulkOutbound,
} from './ses/bulk-send';
import type { ClaimResult } from './claim';
import { renderEmail, type RenderedEmail } from './compose';
import { sesTags, type PreparedSend, type SendSteps } from './job-steps';
import type { EmailSenderDeps, SendJobInput, SendStep } from './job';

/** How long (ms) a process sends campaign mail one email at a time after SES denied it `SendBulkEmail`. */
export const BULK_DENIED_PAUSE_MS = 10 * 60_000;

/**
 * The sending time (ms, at the connection's rate) one shared call of one-email jobs may carry, as a campaign send job
 * does (`CAMPAIGN_JOB_SENDING_MS`, decision 0171): a call is one burst, so at a low rate the jobs go on their own, and
 * the gate's window holds as it does for one-message sends.
 */
export const SHARED_CALL_SENDING_MS = 50;

/** What the bulk path needs of the sender. */
export interface BulkSenderDeps {
  config: EmailSenderDeps['config'];
  transport: Required<Pick<MailTransport, 'sendBulk'>> & Pick<MailTransport, 'sendRate'>;
  steps: SendSteps;
  /** The claim of an email: taken ahead, else now. */
  claim: (emailId: string) => Promise<ClaimResult>;
  /**
   * Sends one prepared email on its own (`SendEmail` with raw content, or the test sink), with its rendering when
   * the bulk path already made it.
   */
  deliver: (p: PreparedSend, rendered?: RenderedEmail) => Promise<SendStep>;
}

/** The bulk path of one sender (see the module notes). */
export interface BulkSender {
  /**
   * Sends the emails of one job (a campaign's, claimed ahead together).
   * @returns for each input, in order, its step.
   * @throws nothing of one email's: an email whose claim, checks or finish threw gets a `retry` step with the error.
   */
  sendMany: (inputs: SendJobInput[]) => Promise<SendStep[]>;
  /**
   * Whether the email of a one-email job may share a call: not a test email, not a relayed message (`body_format`
   * mime), SES has not denied this process `SendBulkEmail` lately, and its connection's rate makes calls of more than
   * one (40/s or more). Otherwise the job sends on its own at once, without waiting for the turn's others.
   */
  mayCoalesce: (p: PreparedSend) => boolean;
  /**
   * Sends the emails of independent one-email jobs that became ready together (`sameTurn`): those that share a
   * call's fields go in one call, every other one on its own, all at once.
   * @returns one step per email, in order; each rejects with its own email's error (its job's attempt fails).
   */
  sendTogether: (ps: readonly PreparedSend[]) => Promise<SendStep>[];
}

/** A prepared email rendered for its bulk entry. */
interface Entry {
  p: PreparedSend;
  entry: BulkEntry;
  subject: string;
  rendered: RenderedEmail;
}

/** An email that goes on its own, with its rendering when it has one. */
interface Single {
  p: PreparedSend;
  rendered?: RenderedEmail;
}

/** Sends emails on their own: one step per email, in order. */
type SendAlone = (items: readonly Single[]) => Promise<SendStep>[];

/** `step`, or a `retry` step when it rejects (see {@link retryStep}). */
async function orRetry(input: SendJobInput, step: () => Promise<SendStep>): Promise<SendStep> {
  try {
    return await step();
  } catch (err) {
    return retryStep(input, err);
  }
}

/**
 * The `retry` step of an email whose attempt failed with `err` (logged): the database failed mid-way, and this
 * email's attempt failed, as a one-email job's would; the others of the job go on.
 */
function retryStep(input: SendJobInput, err: unknown): SendStep {
  input.log.warn({ err: (err as Error).message }, 'send attempt failed; retried in a job of its own');
  return { kind: 'retry', error: err instanceof Error ? err : new Error(String(err)) };
}

/** Creates the bulk path of one sender (see the module notes). */
export function createBulkSender(deps: BulkSenderDeps): BulkSender {
  const { steps } = deps;
  /** Until when (epoch ms) SES is taken to deny this process `SendBulkEmail` (see the module notes). */
  let deniedUntil = 0;

  /**
   * Sends the emails of one job one at a time through `SendEmail`, in order: after a step that stops the job
   * (throttled, unreachable, paused, at its rate) the rest are not tried; each goes back to `queued` and takes that
   * step too, so it waits as long (as `runSendBatch` does with the emails after a stop).
   */
  const oneByOne: SendAlone = (items) => {
    const all = (async () => {
      const out: SendStep[] = [];
      let stop: SendStep | undefined;
      for (const { p, rendered } of items) {
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
        const step = await orRetry(p.input, () => deps.deliver(p, rendered));
        if (step.kind === 'back-off' || step.kind === 'campaign-paused' || step.kind === 'yield') stop = step;
        out.push(step);
      }
      return out;
    })();
    return items.map((_, k) => all.then((s) => s[k]));
  };

  /** Sends the emails of independent jobs on their own, all at once. */
  const atOnce: SendAlone = (items) => items.map(({ p, rendered }) => deps.deliver(p, rendered));

  /**
   * Sends the entries of one call and finishes each by its own result; a call SES refused as a whole goes through
   * `alone`, one email at a time.
   */
  const sendCall = (call: BulkOutbound, entries: Entry[], alone: SendAlone): Promise<SendStep>[] => {
    const log = entries[0].p.input.log;
    const answered = deps.transport.sendBulk(call).then(
      (r) => r.outcomes,
      (err: unknown) => wholeCallFailed(entries, err),
    );
    const settled = answered.then((outcomes) => {
      // Refused as a whole (a 4xx; the router gives each entry the call's error): nothing of it was accepted, and
      // each email goes on its own for its own verdict.
      const refused = entries.filter((_, i) => {
        const o = outcomes[i];
        return 'error' in o && o.wholeCall && classifySendError(o.error).kind === 'permanent';
      });
      const refusedSteps = new Map<Entry, Promise<SendStep>>();
      if (refused.length > 0) {
        const err = (outcomes[entries.indexOf(refused[0])] as { error: Error }).error;
        if (err.name === 'AccessDeniedException') {
          if (Date.now() >= deniedUntil)
            log.error(
              { err: err.message, forMs: BULK_DENIED_PAUSE_MS },
              'SES denied SendBulkEmail (is ses:SendBulkEmail in the IAM policy?); mail goes one email per call',
            );
          deniedUntil = Date.now() + BULK_DENIED_PAUSE_MS;
        } else log.warn({ err: err.message, entries: refused.length }, 'bulk call refused; sending one by one');
        const alones = alone(refused.map(({ p, rendered }) => ({ p, rendered })));
        refused.forEach((e, k) => refusedSteps.set(e, alones[k]));
      }
      return { outcomes, refusedSteps };
    });
    const counted = new Set<unknown>();
    return entries.map((e, i) =>
      settled.then(({ outcomes, refusedSteps }) => {
        const done = refusedSteps.get(e);
        if (done) return done;
        const o = outcomes[i];
        if ('messageId' in o)
          return steps.accepted(e.p, { messageId: o.messageId, subject: e.subject, connection: o.connection });
        // An unreachable SES counts once per call in the backoff.
        const sameCall = counted.has(o.error);
        counted.add(o.error);
        return steps.sendFailed(e.p, o.error, { sameCall });
      }),
    );
  };

  const mayShare = ({ email }: PreparedSend) => !email.test && email.bodyFormat !== 'mime' && Date.now() >= deniedUntil;

  /**
   * Sends `ps` (in order): the emails that share what a call carries once (project, sender, Reply-To, lane
   * priority, configuration set, delivery connection) go in calls of up to {@link BULK_MAX_ENTRIES}; an email alone in its
   * call, or one SES could not build as ours, goes through `alone`.
   * @returns one step per email, in order.
   */
  const dispatch = (
    ps: readonly PreparedSend[],
    alone: SendAlone,
    callSize: (connection?: string) => number,
  ): Promise<SendStep>[] => {
    const result = new Array<Promise<SendStep>>(ps.length);
    /** Calls by what their entries share. */
    const calls = new Map<string, { call: BulkOutbound; entries: Entry[] }>();
    const single: { i: number; s: Single }[] = [];
    /** Groups `p` into its call, or among the singles; `result[i]` when it is done already. */
    const place = (p: PreparedSend, i: number) => {
      const { email, input } = p;
      if (!mayShare(p)) return void single.push({ i, s: { p } });
      let rendered: RenderedEmail;
      try {
        rendered = renderEmail(deps.config, email, input.log);
      } catch (err) {
        return void (result[i] = steps.composeFailed(p, err));
      }
      const { content, headers } = rendered;
      const data = JSON.stringify({ subject: content.subject, html: content.html, text: content.text });
      if (!bulkEligible(email, headers, data.length)) return void single.push({ i, s: { p, rendered } });
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
        call.projectId,
        call.from,
        call.replyTo,
        call.priority,
        call.stream,
        call.tracking,
        call.trackingDomain,
        call.connection,
      ]);
      const group = calls.get(key) ?? calls.set(key, { call, entries: [] }).get(key)!;
      group.entries.push({
        p,
        subject: content.subject,
        rendered,
        entry: { to: mailboxHeader(email.toEmail, email.toName), data, headers, tags: sesTags(email), key: email.id },
      });
    };
    // An error of one email's own (none is expected here) is its step's, so the others' calls still go.
    ps.forEach((p, i) => {
      try {
        place(p, i);
      } catch (err) {
        result[i] = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    const index = new Map(ps.map((p, i) => [p, i]));
    for (const { call, entries } of calls.values()) {
      const most = callSize(call.connection);
      for (let from = 0; from < entries.length; from += most) {
        const chunk = entries.slice(from, from + most);
        // An email alone in its call goes by SendEmail: the same cost, and its Message-ID stays ours.
        if (chunk.length === 1) {
          const { p, rendered } = chunk[0];
          single.push({ i: index.get(p)!, s: { p, rendered } });
          continue;
        }
        const stepsOf = sendCall({ ...call, entries: chunk.map((e) => e.entry) }, chunk, alone);
        for (const [k, e] of chunk.entries()) result[index.get(e.p)!] = stepsOf[k];
      }
    }
    // In the order given (a job's emails one after the other keep the job's order).
    single.sort((a, b) => a.i - b.i);
    const alones = alone(single.map((x) => x.s));
    for (const [k, x] of single.entries()) result[x.i] = alones[k];
    return result;
  };

  const sendMany = async (inputs: SendJobInput[]): Promise<SendStep[]> => {
    const result = new Array<SendStep>(inputs.length);
    const prepared = await Promise.all(
      inputs.map(async (input, i) => {
        try {
          const r = await steps.prepare(input, await deps.claim(input.emailId));
          if ('step' in r) result[i] = r.step;
          else return r.ready;
        } catch (err) {
          result[i] = retryStep(input, err);
        }
        return undefined;
      }),
    );
    const at = prepared.flatMap((p, i) => (p ? [i] : []));
    const stepsOf = dispatch(
      at.map((i) => prepared[i]!),
      oneByOne,
      () => BULK_MAX_ENTRIES,
    );
    await Promise.all(at.map((i, k) => orRetry(inputs[i], () => stepsOf[k]).then((step) => (result[i] = step))));
    return result;
  };

  /**
   * The most one-email jobs one shared call carries: {@link SHARED_CALL_SENDING_MS} of sending at the connection's
   * rate, as a campaign job carries (1 below 40/s: every email on its own), at most {@link BULK_MAX_ENTRIES}.
   */
  const sharedCallSize = (connection?: string): number => {
    const rate = deps.transport.sendRate?.(connection);
    if (rate === undefined) return BULK_MAX_ENTRIES;
    return Math.max(1, Math.min(BULK_MAX_ENTRIES, Math.floor((rate * SHARED_CALL_SENDING_MS) / 1000)));
  };

  const sendTogether = (ps: readonly PreparedSend[]): Promise<SendStep>[] =>
    ps.length === 1 ? [deps.deliver(ps[0])] : dispatch(ps, atOnce, sharedCallSize);

  return { sendMany, mayCoalesce: (p) => mayShare(p) && sharedCallSize(p.connection) > 1, sendTogether };
}

/**
 * Gathers the items given in one turn of the event loop (until a `setImmediate`) and runs them together: callers
 * woken together (the jobs whose claims one statement returned) share `run`; a caller alone in its turn runs alone,
 * at most one turn later.
 * @param run - one promise per item, in order; throwing rejects every item of the turn.
 */
export function gatheredPerTurn<I, O>(run: (items: I[]) => Promise<O>[]): (item: I) => Promise<O> {
  type Caller = { item: I; resolve: (o: O) => void; reject: (err: unknown) => void };
  let turn: Caller[] | undefined;
  return (item) =>
    new Promise<O>((resolve, reject) => {
      if (!turn) {
        const gathered: Caller[] = [];
        turn = gathered;
        setImmediate(() => {
          turn = undefined;
          let outs: Promise<O>[];
          try {
            outs = run(gathered.map((g) => g.item));
          } catch (err) {
            return gathered.forEach((g) => g.reject(err));
          }
          for (const [k, o] of outs.entries()) o.then(gathered[k].resolve, gathered[k].reject);
        });
      }
      turn.push({ item, resolve, reject });
    });
}
