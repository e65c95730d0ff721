/**
 * The exact global send-rate gate: at most `emailsPerSecond` SES requests in any one-second window, across every
 * worker process, counted where the requests leave for SES.
 *
 * Why it looks the way it does (each step was measured: `test/e2e/scale.test.ts`, `test/e2e/limiter.test.ts`):
 * - BullMQ's limiter paces job *starts*; the work between a job's start and its SES call (claim, render, MIME,
 *   signing) varies, which alone let 16 sends into one second at 14/s. So the gate is taken after signing,
 *   immediately before the request is written.
 * - Spacing the *decisions* (`now ≥ last + interval` in one Redis script) is not enough on a busy host: the time
 *   from the script's decision to the request on the wire is not bounded. Measured with three workers on two busy
 *   cores: the Redis reply reached the worker's JavaScript up to 132 ms after it was sent (p99 20 ms), and the
 *   request reached SES up to 155 ms after its decision. A send decided early and written late bunches up with
 *   the ones after it: 15 sends in one second in 2 of 4 runs at a 25 ms margin.
 * - So every grant is *confirmed* once its request has been written, and the window counts confirmations: the
 *   SES `SendEmail` request that starts right after a grant (a `SendBulkEmail` call: its grants, one per entry; seen on
 *   Node's `http.client.request.start` diagnostics channel, matched by method and path) confirms it on its `finish` event, when its last byte has
 *   been handed to the operating system (or on `close`, if it never gets there). A script call made after that
 *   records the send at the Redis clock's `now`, which is therefore no earlier than the write (one call for the
 *   grants of a process confirmed in the same turn of the event loop, and that call is the process's next ask
 *   when one is going out in the same turn: a worker sending steadily makes one gate call per turn, not two). A
 *   new grant is given only while fewer than `emailsPerSecond` sends are recorded in the trailing window of
 *   `1000 + safetyMs` ms; a grant not yet confirmed counts as inside the window (until {@link PENDING_TTL_MS}, for a process killed in
 *   between). The decision for a send is taken before its write and every earlier send's record is after its
 *   write, so any `emailsPerSecond + 1` requests leave at least `1000 + safetyMs` ms apart however late a worker
 *   runs; `safetyMs` only has to absorb the jitter of the way from the socket to SES. (Confirming in the check
 *   phase right after the grant instead was not enough: a request that has to open a connection, or whose socket
 *   is not yet back in the pool, is written later; measured, 15 sends in a second in 2 of 10 runs.) A grant whose
 *   request never starts (the SDK failed before sending, or a caller that is not the SES client) is confirmed
 *   in the check phase after the grant.
 * - Decisions stay spaced by `(1000 + safetyMs) / emailsPerSecond` too, so the sends are smooth, not bursts. The
 *   asks of a process made in one turn of the event loop go to Redis as one script call; at rates above 500/s that
 *   call may grant several, as many intervals as have passed within the last {@link GRANT_BURST_US} (2 ms), so the
 *   spacing holds on average over 2 ms instead of between every two sends (at 10,000/s, 64 concurrent asks took
 *   280 script calls one by one, and at most 16 so). A `SendBulkEmail` call's entries leave together, so they are
 *   granted together and the decisions after wait out their intervals: granted one per interval, the first entry's
 *   grant would hold its place in the window for the whole wait before the write (measured at 300/s: 268 sent a
 *   second instead of 282–285).
 * - Within a process, callers go by priority (the send queue's lanes: transactional before workflow before
 *   campaign): while a more urgent caller waits, the less urgent ones stop asking, so it takes the next slot (or
 *   the one after, when a less urgent ask was already on its way to Redis). Without it every job the worker had claimed (up to `WORKER_CONCURRENCY`, almost always campaign
 *   jobs, as the limiter starts jobs a little faster than the gate grants) raced for each slot, and a
 *   transactional email claimed mid-campaign went out after about that many campaign sends (measured: 9 at a
 *   concurrency of 8).
 *
 * Keys: `key` (last decision, µs), `key:pending` and `key:sent` (sorted sets, member = grant token, score = µs on
 * the Redis clock). They share `key`'s hash slot when `key` carries a `{hash tag}`.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import type { ClientRequest } from 'node:http';
import type { Redis } from 'ioredis';
import { CATCH_UP_US, TAKE_SCRIPT } from './rate-gate-script';

export { CATCH_UP_US };

/**
 * Thrown by {@link SendRateGate.acquire} given a `maxWaitMs` when the send would wait longer than that for its
 * slot: nothing was granted or sent, and the caller gives its worker slot back (the send job puts its row back to
 * `queued` with its claim token and its job back in the queue, delayed by {@link retryInMs}). With several
 * delivery connections a saturated connection's mail thus never holds the slots other connections' mail needs.
 */
export class GateBusyError extends Error {
  override readonly name = 'GateBusyError';
  /** @param retryInMs - when (ms from now) the send is worth trying again: about when its turn would come. */
  constructor(readonly retryInMs: number) {
    super(`send-rate gate saturated: try again in ${retryInMs} ms`);
  }
}

/** How long (ms) an unconfirmed grant keeps its place in the window: a process killed between grant and write. */
export const PENDING_TTL_MS = 5_000;

/**
 * How far back (µs) one ask may take the intervals that have passed: at rates whose interval is shorter (above
 * 500 emails/s), the asks of a process's jobs made in one turn of the event loop are granted together, several
 * per script call, instead of one per interval with the rest refused and asked again (measured with
 * `npm run bench -- worker` at 10,000/s: 1.48 scripts per email before). At lower rates one grant per interval.
 */
export const GRANT_BURST_US = 2_000;

/** The request a grant is for: SES v2 `SendEmail` (`POST /v2/email/outbound-emails`), or `SendBulkEmail`. */
export const SES_SEND_PATH = '/v2/email/outbound-emails';
export const SES_BULK_SEND_PATH = '/v2/email/outbound-bulk-emails';

/** Confirmations of this process's grants whose request has not started yet, oldest first. */
const awaitingRequest: (() => void)[] = [];
let listening = false;

/** Hands each SES send request that starts to the oldest grant waiting for one; it confirms once written. */
function listenForSesRequests(): void {
  if (listening) return;
  listening = true;
  diagnostics.subscribe('http.client.request.start', (message) => {
    const request = (message as { request: ClientRequest }).request;
    const path = request.path;
    if (request.method !== 'POST' || !(path.startsWith(SES_SEND_PATH) || path.startsWith(SES_BULK_SEND_PATH))) return;
    const confirm = awaitingRequest.shift();
    if (!confirm) return;
    if (request.writableFinished) confirm();
    else {
      request.once('finish', confirm);
      request.once('close', confirm);
    }
  });
}

/**
 * Interval between two decisions (µs) for a rate in emails/s; `safetyMs` is spread over each second's worth of
 * intervals (`SES_RATE_SAFETY_MS`).
 */
export function gateIntervalMicros(emailsPerSecond: number, safetyMs: number): number {
  return Math.ceil(((1000 + safetyMs) * 1000) / emailsPerSecond);
}

/** The shared send-rate gate in Redis (see the module notes). */
export class SendRateGate {
  private intervalUs: number;
  private readonly windowUs: number;
  private readonly keys: [string, string, string];
  private readonly id = randomBytes(6).toString('hex');
  private seq = 0;
  /** Granted tokens whose requests were written, waiting for this turn's confirmation ({@link confirmLater}). */
  private readonly confirming: string[] = [];
  /** Callers of this process in {@link acquire}, per priority: only the most urgent ones ask Redis. */
  private readonly asking = new Map<number, number>();
  /**
   * Whether a multi-grant ask holds the turn: calls of several messages take their grants in turn, so each call
   * leaves (and frees its worker slot) after its own grants, not all of them after all their grants. The calls
   * waiting ({@link turnQueue}) go most urgent first, in arrival order within a priority: a transactional call
   * does not wait behind the campaign calls that came before it.
   */
  private turnHeld = false;
  /** The calls waiting for the turn, in the order they get it. */
  private readonly turnQueue: { priority: number; go: () => void }[] = [];
  /** Messages of the calls waiting for their turn. */
  private turnWaiting = 0;
  /** The asks of this turn of the event loop not yet sent, per priority: one script call each ({@link ask}). */
  private readonly turnAsks = new Map<string, { tokens: string[]; reply: Promise<[number, number]> }>();

  /**
   * @param redis - any connection (the scripts run atomically on the server, using the server's clock).
   * @param key - one key shared by every worker of the deployment.
   * @param emailsPerSecond - the send rate (the SES account's, capped by `SES_MAX_SEND_RATE`): sends allowed in any
   *   window of `1000 + safetyMs` ms; changed later with {@link setRate}.
   * @param safetyMs - `SES_RATE_SAFETY_MS`: ms added to the one-second window, for jitter after the write.
   */
  constructor(
    private readonly redis: Redis,
    key: string,
    private emailsPerSecond: number,
    private readonly safetyMs: number,
  ) {
    this.intervalUs = gateIntervalMicros(emailsPerSecond, safetyMs);
    this.windowUs = (1000 + safetyMs) * 1000;
    this.keys = [key, `${key}:pending`, `${key}:sent`];
    listenForSesRequests();
  }

  /**
   * Changes the rate (emails/s, ≥ 1) from the next decision on: the rate travels with each decision, so every
   * process decides by its own latest reading of the account (they agree again within `SES_ACCOUNT_REFRESH_MS`).
   */
  setRate(emailsPerSecond: number): void {
    this.emailsPerSecond = Math.max(1, emailsPerSecond);
    this.intervalUs = gateIntervalMicros(this.emailsPerSecond, this.safetyMs);
  }

  /** The rate in force (emails/s). */
  get rate(): number {
    return this.emailsPerSecond;
  }

  /**
   * Waits until this process may send, records the grant, and confirms it once the caller's SES request has been
   * written (the caller must start that request without yielding to the event loop, as the SES transport does
   * right after signing). A failed confirmation leaves the grant pending until {@link PENDING_TTL_MS}: slower,
   * never faster.
   *
   * @param priority - the send's lane priority (lower first: the send queue's priority): while a more urgent
   *   caller of this process waits, the less urgent ones do not ask. Default 0.
   * @param maxWaitMs - when given, the longest wait (ms) for the slot: a caller that would wait longer gives up
   *   with {@link GateBusyError}, at once when this process already has as many callers of the same or a more
   *   urgent priority waiting as the gate grants in `maxWaitMs` (at least one), else once `maxWaitMs` has
   *   passed. Omitted (one delivery connection): waits as long as it takes.
   * @param count - the messages of the request (a `SendBulkEmail` call's entries, default 1): as many grants, each
   *   counted as one send's, granted together as far as the window has room (the decisions after wait out the
   *   intervals they took), all confirmed by the one request (those taken before a {@link GateBusyError}: at
   *   once). Such calls take their grants one call after another, the most urgent waiting call next
   *   ({@link turnHeld}).
   * @returns the time waited in ms.
   * @throws the Redis error when Redis cannot be asked (the send is then not made); {@link GateBusyError}.
   */
  async acquire(priority = 0, maxWaitMs?: number, count = 1): Promise<number> {
    const started = performance.now();
    // More messages than a second holds can never leave in one request (the rate fell since the call was sized).
    if (count > this.emailsPerSecond) throw new GateBusyError(1000);
    if (maxWaitMs !== undefined) {
      const ahead = this.waitingAtOrAbove(priority) + this.turnWaiting + count - 1;
      if (ahead >= Math.max(1, Math.floor((this.emailsPerSecond * maxWaitMs) / 1000))) {
        throw new GateBusyError(
          Math.max(maxWaitMs, Math.ceil((ahead * (1000 + this.safetyMs)) / this.emailsPerSecond)),
        );
      }
    }
    const tokens = Array.from({ length: Math.max(1, count) }, () => `${this.id}:${++this.seq}`);
    // Its turn first, counted apart meanwhile: a call waiting for its turn asks nothing, and outranks nobody.
    const turnDone = tokens.length > 1 ? await this.takeTurn(priority, tokens.length) : undefined;
    this.asking.set(priority, (this.asking.get(priority) ?? 0) + tokens.length);
    try {
      const granted: string[] = [];
      try {
        await this.take(tokens, granted, priority, started, maxWaitMs);
      } catch (err) {
        for (const token of granted) this.confirmLater(token);
        throw err;
      }
      this.confirmOnRequest(tokens);
      return performance.now() - started;
    } finally {
      turnDone?.();
      const left = (this.asking.get(priority) ?? tokens.length) - tokens.length;
      if (left > 0) this.asking.set(priority, left);
      else this.asking.delete(priority);
    }
  }

  /**
   * Waits for the multi-grant turn ({@link turnHeld}): at once when nobody holds it, else behind the waiting calls
   * of the same or a more urgent priority.
   * @returns the release of the turn: it passes to the next waiting call, or frees it.
   */
  private async takeTurn(priority: number, count: number): Promise<() => void> {
    if (this.turnHeld) {
      this.turnWaiting += count;
      try {
        await new Promise<void>((go) => {
          const at = this.turnQueue.findIndex((w) => w.priority > priority);
          this.turnQueue.splice(at === -1 ? this.turnQueue.length : at, 0, { priority, go });
        });
      } finally {
        this.turnWaiting -= count;
      }
    }
    // Handed over by the release (still held), or taken free.
    this.turnHeld = true;
    return () => {
      const next = this.turnQueue.shift();
      if (next) next.go();
      else this.turnHeld = false;
    };
  }

  /** Confirms `tokens` once the caller's SES request has been written, or now if none starts (see `acquire`). */
  private confirmOnRequest(tokens: readonly string[]): void {
    let done = false;
    const confirm = () => {
      if (done) return;
      done = true;
      for (const token of tokens) this.confirmLater(token);
    };
    awaitingRequest.push(confirm);
    setImmediate(() => {
      const i = awaitingRequest.indexOf(confirm);
      if (i === -1) return;
      awaitingRequest.splice(i, 1);
      confirm();
    });
  }

  /**
   * Confirms `token` in the check phase of this turn of the event loop, in one script with the other grants of
   * this process confirmed in the same turn (requests whose last byte left in one poll): one Redis call instead of
   * one per send; when an ask of this process is about to go out, on that ask's call instead of one of its own.
   * Recorded a little later than the write, never earlier: the window only counts it longer.
   */
  private confirmLater(token: string): void {
    this.confirming.push(token);
    if (this.confirming.length > 1) return;
    setImmediate(() => {
      // An ask of this process not yet sent carries them (its call runs in this check phase or the next), so a
      // process sending steadily makes one script call per turn, not two.
      if (this.turnAsks.size > 0) return;
      const tokens = this.confirming.splice(0);
      if (tokens.length === 0) return;
      TAKE_SCRIPT.run(this.redis, this.keys, this.takeArgs(tokens, [])).catch(() => undefined);
    });
  }

  /** `TAKE`'s arguments: the decision's parameters, the tokens to confirm, then the tokens asking. */
  private takeArgs(confirms: readonly string[], asking: readonly string[], together = false): (string | number)[] {
    return [
      this.intervalUs,
      this.windowUs,
      this.emailsPerSecond,
      PENDING_TTL_MS * 1000,
      Math.max(this.intervalUs, GRANT_BURST_US),
      together ? 1 : 0,
      confirms.length,
      ...confirms,
      ...asking,
    ];
  }

  /** Callers of this process waiting with `priority` or a more urgent one. */
  private waitingAtOrAbove(priority: number): number {
    let n = 0;
    for (const [p, count] of this.asking) if (p <= priority) n += count;
    return n;
  }

  /** Whether a caller of this process with a more urgent priority than `priority` is waiting. */
  private outranked(priority: number): boolean {
    for (const p of this.asking.keys()) if (p < priority) return true;
    return false;
  }

  /**
   * Asks for `token` together with the other asks of this priority made in this turn of the event loop (sent in
   * its check phase, as one script call).
   *
   * @returns 0 when granted, else the µs to wait before asking again (at least an interval when others of the
   *   same call were granted).
   * @throws the Redis error (every ask of the call alike).
   */
  private async ask(token: string, priority: number, together: boolean): Promise<number> {
    // A bulk call's tokens go in a script call of their own (granted all or none), never with single asks.
    const key = together ? `${priority}:together` : String(priority);
    let batch = this.turnAsks.get(key);
    if (!batch) {
      const b = { tokens: [] as string[], reply: Promise.resolve<[number, number]>([0, 0]) };
      b.reply = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        if (this.turnAsks.get(key) === b) this.turnAsks.delete(key);
        // The confirmations due (requests already written), recorded by this call before it decides.
        const confirms = this.confirming.splice(0);
        let reply: [number, number];
        try {
          reply = (await TAKE_SCRIPT.run(this.redis, this.keys, this.takeArgs(confirms, b.tokens, together))) as [
            number,
            number,
          ];
        } catch (err) {
          // The confirmations are not lost with the ask: they go again (alone, or on the next ask). Recorded twice
          // if the failed call did run, which only moves their time later.
          for (const token of confirms) this.confirmLater(token);
          throw err;
        }
        return [Number(reply[0]), Number(reply[1])] as [number, number];
      });
      this.turnAsks.set(key, b);
      batch = b;
    }
    const index = batch.tokens.push(token) - 1;
    const [granted, waitUs] = await batch.reply;
    return index < granted ? 0 : Math.max(waitUs, granted > 0 ? this.intervalUs : 1);
  }

  /**
   * Asks Redis until every one of `tokens` is granted (pushed to `granted` as they are), holding back while
   * outranked; see {@link acquire}. Several tokens (a bulk call's) ask together, in one script call each time.
   */
  private async take(
    tokens: readonly string[],
    granted: string[],
    priority: number,
    started: number,
    maxWaitMs: number | undefined,
  ): Promise<void> {
    /** Gives up (see `acquire`'s `maxWaitMs`) when sleeping `ms` more would go past the bound. */
    const bound =
      maxWaitMs === undefined
        ? undefined
        : (ms: number) => {
            if (performance.now() - started + ms > maxWaitMs)
              throw new GateBusyError(Math.max(Math.ceil(ms), Math.min(maxWaitMs, 1000)));
          };
    const together = tokens.length > 1;
    let left = [...tokens];
    for (;;) {
      if (this.outranked(priority)) {
        // A more urgent send of this process is waiting: the most urgent ask alone until they are granted.
        const ms = Math.max(1, this.intervalUs / 4000);
        bound?.(ms);
        await new Promise((r) => setTimeout(r, ms));
        continue;
      }
      const waits = await Promise.all(left.map((token) => this.ask(token, priority, together)));
      granted.push(...left.filter((_, i) => waits[i] <= 0));
      left = left.filter((_, i) => waits[i] > 0);
      if (left.length === 0) return;
      const ms = Math.max(1, Math.max(...waits) / 1000);
      bound?.(ms);
      await new Promise((r) => setTimeout(r, ms));
    }
  }
}
