/**
 * The SES account as this worker process knows it: read at start and every `SES_ACCOUNT_REFRESH_MS`, kept when a
 * read fails, and the send rate derived from it (`effectiveSendRate`: the account's maximum, capped by
 * `SES_MAX_SEND_RATE`). A rate that changes at a refresh is pushed to the listeners at once (the rate gate and the
 * send worker's limiter), without a restart.
 *
 * Between two reads, the sends this deployment made are added to the reading's `sentLast24Hours` (the hourly
 * `reputation_counts` from the reading's hour on, less what they held at the reading), so a fast campaign is seen
 * using the quota within one quota check, not one refresh later.
 *
 * Nothing here throws to its caller: a failed read (SES refusing `GetAccount`, unreachable, Postgres down for
 * the local count) is logged, the last figures stay (or, before any, the cap or 14/s), and the next read is
 * tried after `min(SES_ACCOUNT_REFRESH_MS, 30 s)`.
 *
 * @module
 */
import { effectiveSendRate, type AccountProvider, type SesAccount } from '@mailroom/mail/ses-account';
import type { MailConfig } from '@mailroom/mail/config';
import type { SendingConfig } from '../config';
import { type Logger } from '@mailroom/platform/logger';

/** How long the start waits for the first reading before it goes on with the fallback rate (ms). */
export const FIRST_READ_WAIT_MS = 5_000;
/** Longest wait before a failed read is tried again (ms). */
const RETRY_AFTER_FAILURE_MS = 30_000;

/** The account figures now: the last reading plus this deployment's sends since. */
export interface AccountEstimate extends SesAccount {
  /** Sends counted locally since the reading (included in `sentLast24Hours`). */
  sentSinceRead: number;
}

/** Dependencies of the watcher. */
export interface AccountWatcherDeps {
  provider: AccountProvider;
  config: Pick<MailConfig, 'sesMaxSendRate'> & Pick<SendingConfig, 'sesAccountRefreshMs'>;
  logger: Logger;
  /**
   * Live sends in the hourly buckets from `hour` on (the db package's `sentSinceHour`); used for the sends since a
   * reading. Omitted: readings are taken as they are.
   */
  sentSinceHour?: (hour?: Date) => Promise<{ hour: Date; sent: number }>;
  /** How long {@link AccountWatcher.start} waits for the first reading (ms; default {@link FIRST_READ_WAIT_MS}). */
  firstReadWaitMs?: number;
}

/** Reads and keeps the account's figures; see the module notes. */
export class AccountWatcher {
  private last?: SesAccount;
  /** The local count at the last reading, and the hour it counts from. */
  private baseline?: { hour: Date; sent: number };
  private lastError?: string;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private reading?: Promise<void>;
  private readonly listeners: ((rate: number) => void)[] = [];
  private currentRate: number;

  constructor(private readonly deps: AccountWatcherDeps) {
    this.currentRate = effectiveSendRate(undefined, deps.config.sesMaxSendRate);
  }

  /** The send rate to keep now (emails/s, whole, ≥ 1). */
  get rate(): number {
    return this.currentRate;
  }

  /** The last successful reading, if any. */
  get account(): SesAccount | undefined {
    return this.last;
  }

  /** Why the last read failed (undefined after a success). */
  get error(): string | undefined {
    return this.lastError;
  }

  /** Calls `fn` with the new rate whenever it changes. */
  onRateChange(fn: (rate: number) => void): void {
    this.listeners.push(fn);
  }

  /**
   * Reads the account now (at most one read at a time) and schedules the next one. Never throws.
   * @returns once the read has ended, successfully or not.
   */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  /**
   * The first read, waited for at most `firstReadWaitMs` (default {@link FIRST_READ_WAIT_MS}: a frozen SES must not
   * hold the worker's start; the read goes on and applies when it lands), then one every `SES_ACCOUNT_REFRESH_MS`.
   */
  async start(): Promise<void> {
    const waitMs = this.deps.firstReadWaitMs ?? FIRST_READ_WAIT_MS;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.refresh(), new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
    if (!this.last && !this.lastError)
      this.deps.logger.warn(
        { waitedMs: waitMs, ratePerSecond: this.rate },
        'SES account not read yet; starting at the fallback rate',
      );
  }

  /** Stops the refresh timer. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /**
   * The last reading with this deployment's sends since added to `sentLast24Hours`; undefined before any reading.
   * When the local count cannot be read (Postgres down), the reading alone.
   */
  async estimate(): Promise<AccountEstimate | undefined> {
    const last = this.last;
    if (!last) return undefined;
    const baseline = this.baseline;
    if (!baseline || !this.deps.sentSinceHour) return { ...last, sentSinceRead: 0 };
    try {
      const now = await this.deps.sentSinceHour(baseline.hour);
      const since = Math.max(0, now.sent - baseline.sent);
      return { ...last, sentLast24Hours: last.sentLast24Hours + since, sentSinceRead: since };
    } catch (err) {
      this.deps.logger.warn(
        { err: (err as Error).message },
        'local send count unavailable; using the last SES account reading alone',
      );
      return { ...last, sentSinceRead: 0 };
    }
  }

  private async read(): Promise<void> {
    const { provider, logger, config } = this.deps;
    let next = config.sesAccountRefreshMs;
    try {
      // The baseline is taken just before the reading: a send in between is counted twice (safe side), never missed.
      const baseline = this.deps.sentSinceHour ? await this.deps.sentSinceHour() : undefined;
      const account = await provider.getAccount();
      const first = !this.last;
      this.last = account;
      this.baseline = baseline;
      this.lastError = undefined;
      this.setRate(effectiveSendRate(account.maxSendRate, config.sesMaxSendRate));
      const figures = {
        provider: provider.kind,
        maxSendRate: account.maxSendRate,
        max24HourSend: Number.isFinite(account.max24HourSend) ? account.max24HourSend : 'unlimited',
        sentLast24Hours: account.sentLast24Hours,
        sendingEnabled: account.sendingEnabled,
        productionAccess: account.productionAccess,
        enforcementStatus: account.enforcementStatus,
        ratePerSecond: this.rate,
        capPerSecond: config.sesMaxSendRate ?? null,
      };
      if (!account.sendingEnabled || (account.enforcementStatus && account.enforcementStatus !== 'HEALTHY')) {
        logger.error(
          figures,
          'SES account: sending paused or under review (sends wait as throttled until it is resolved)',
        );
      } else if (first) logger.info(figures, 'SES account read');
      else logger.debug(figures, 'SES account read');
    } catch (err) {
      this.lastError = `${(err as Error).name}: ${(err as Error).message}`.slice(0, 500);
      next = Math.min(next, RETRY_AFTER_FAILURE_MS);
      logger.warn(
        {
          err: this.lastError,
          provider: provider.kind,
          ratePerSecond: this.rate,
          keptReadingFrom: this.last?.readAt.toISOString() ?? null,
          retryInMs: next,
        },
        this.last
          ? 'SES account not read; keeping the last figures'
          : 'SES account not read; sending at SES_MAX_SEND_RATE (or 14/s) until it is',
      );
    }
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), next);
    this.timer.unref();
  }

  private setRate(rate: number): void {
    if (rate === this.currentRate) return;
    const previous = this.currentRate;
    this.currentRate = rate;
    this.deps.logger.info({ previous, ratePerSecond: rate }, 'send rate changed');
    for (const fn of this.listeners) {
      try {
        fn(rate);
      } catch (err) {
        this.deps.logger.error({ err }, 'send rate listener failed');
      }
    }
  }
}
