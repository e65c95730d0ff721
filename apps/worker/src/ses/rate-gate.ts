/**
 * The exact global send-rate gate: at most `emailsPerSecond` SES calls in any one-second window, across every
 * worker process, measured at the moment a signed request leaves for SES.
 *
 * BullMQ's limiter paces job *starts*; the work between a job's start and its SES call (claim, render, MIME,
 * signing) varies, and measured here that alone let 16 sends into one second at a 14/s limit. Reserving future
 * slots is not enough either: a sender that wakes late still leaves the next one on its early slot (measured:
 * 15 in a second). So the decision is taken at send time against the *last actual* send: one Redis script
 * atomically checks `now >= last + interval` on the server's clock and, if so, records `now` as the last send;
 * otherwise it answers how long to wait and the caller sleeps and asks again. Only the sub-millisecond path from
 * the script's reply to the socket write is left between decision and send; the interval's small safety margin
 * covers it.
 *
 * @module
 */
import type { Redis } from 'ioredis';

const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local interval = tonumber(ARGV[1])
if now >= last + interval then
  redis.call('SET', KEYS[1], string.format('%.0f', now), 'PX', 60000)
  return 0
end
return last + interval - now
`;

/**
 * Interval between two sends (µs) for a rate in emails/s; `safetyMs` is spread over each second's worth of
 * intervals and tolerates that much send-time jitter (`SES_RATE_SAFETY_MS`).
 */
export function gateIntervalMicros(emailsPerSecond: number, safetyMs: number): number {
  return Math.ceil(((1000 + safetyMs) * 1000) / emailsPerSecond);
}

/** The shared last-send time in Redis. */
export class SendRateGate {
  private readonly intervalUs: number;

  /**
   * @param redis - any connection (the script runs atomically on the server, using the server's clock).
   * @param key - one key shared by every worker of the deployment.
   * @param emailsPerSecond - `SES_MAX_SEND_RATE`.
   * @param safetyMs - `SES_RATE_SAFETY_MS`.
   */
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    emailsPerSecond: number,
    safetyMs: number,
  ) {
    this.intervalUs = gateIntervalMicros(emailsPerSecond, safetyMs);
  }

  /** Waits until this process may send, and records the send. @returns the time waited in ms. */
  async acquire(): Promise<number> {
    const started = performance.now();
    for (;;) {
      const waitUs = Number(await this.redis.eval(TAKE, 1, this.key, String(this.intervalUs)));
      if (waitUs <= 0) return performance.now() - started;
      await new Promise((r) => setTimeout(r, Math.max(1, waitUs / 1000)));
    }
  }
}
