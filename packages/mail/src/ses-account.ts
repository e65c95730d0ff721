/**
 * The SES account's sending limits: the maximum send rate, the 24-hour quota and what was sent in the last
 * 24 hours, behind a provider interface (like {@link DomainIdentityProvider}).
 *
 * - {@link SesAccountProvider}: Amazon SES v2 `GetAccount` (`GET /v2/email/account`, IAM `ses:GetAccount`).
 * - {@link LocalAccountProvider}: for the SES emulator, which has no `GetAccount`: the configured figures
 *   (`SES_LOCAL_MAX_SEND_RATE`, `SES_LOCAL_MAX_24H_SEND`) and this service's own count of live sends in the
 *   last 24 hours (`reputation_counts`, injected so this package stays free of the database).
 *
 * Also the two decisions built on these figures: the send rate the workers use ({@link effectiveSendRate}) and
 * whether the 24-hour quota is spent for campaigns ({@link quotaState}).
 *
 * @module
 */
import { GetAccountCommand, type SESv2Client } from '@aws-sdk/client-sesv2';
import type { MailConfig } from './config';
import { createSesClient } from './ses-client';

/** The account's limits as last read. */
export interface SesAccount {
  /** Most emails SES accepts per second (emails/s). */
  maxSendRate: number;
  /** Most emails in any 24 hours (emails); `Infinity` when SES reports the quota unlimited (-1). */
  max24HourSend: number;
  /** Emails sent in the last 24 hours (emails). */
  sentLast24Hours: number;
  /** False when SES has paused the account's sending (a review, or the operator). */
  sendingEnabled: boolean;
  /** False in the SES sandbox (only verified recipients; 200/day at 1/s). Unknown for the local provider. */
  productionAccess?: boolean;
  /** SES reputation status: `HEALTHY`, `PROBATION` (under review) or `SHUTDOWN`. */
  enforcementStatus?: string;
  /** When these figures were read. */
  readAt: Date;
}

/** Reads the account's sending limits. */
export interface AccountProvider {
  /** `ses` or `local` (logs, metrics). */
  readonly kind: 'ses' | 'local';
  /** @throws the provider's error (SES: AccessDenied, throttling, unreachable; local: the count's query). */
  getAccount(): Promise<SesAccount>;
}

/** Amazon SES v2 `GetAccount`. */
export class SesAccountProvider implements AccountProvider {
  readonly kind = 'ses';
  private readonly client: SESv2Client;

  constructor(
    config: Pick<MailConfig, 'sesRegion' | 'sesEndpoint' | 'awsCredentials'> &
      Partial<Pick<MailConfig, 'sesTimeoutMs'>>,
    client?: SESv2Client,
  ) {
    this.client =
      client ??
      createSesClient(config, { maxAttempts: 2, ...(config.sesTimeoutMs ? { timeoutMs: config.sesTimeoutMs } : {}) });
  }

  async getAccount(): Promise<SesAccount> {
    const got = await this.client.send(new GetAccountCommand({}));
    const q = got.SendQuota;
    if (q?.MaxSendRate === undefined || q.Max24HourSend === undefined)
      throw new Error('GetAccount answered without SendQuota');
    return {
      maxSendRate: q.MaxSendRate,
      max24HourSend: q.Max24HourSend < 0 ? Infinity : q.Max24HourSend,
      sentLast24Hours: q.SentLast24Hours ?? 0,
      sendingEnabled: got.SendingEnabled ?? true,
      ...(got.ProductionAccessEnabled !== undefined ? { productionAccess: got.ProductionAccessEnabled } : {}),
      ...(got.EnforcementStatus ? { enforcementStatus: got.EnforcementStatus } : {}),
      readAt: new Date(),
    };
  }
}

/**
 * The configured figures and this service's own count of live sends in the last 24 hours (the emulator has no
 * account). The count is of this deployment's database only: mail sent by anything else is not seen.
 */
export class LocalAccountProvider implements AccountProvider {
  readonly kind = 'local';

  /**
   * @param figures - `SES_LOCAL_MAX_SEND_RATE` (emails/s) and `SES_LOCAL_MAX_24H_SEND` (emails).
   * @param countSentLast24Hours - live emails sent in the last 24 hours, all projects (see the db package's
   *   `sentInLast24Hours`).
   */
  constructor(
    private readonly figures: { maxSendRate: number; max24HourSend: number },
    private readonly countSentLast24Hours: () => Promise<number>,
  ) {}

  async getAccount(): Promise<SesAccount> {
    const sent = await this.countSentLast24Hours();
    return {
      maxSendRate: this.figures.maxSendRate,
      max24HourSend: this.figures.max24HourSend,
      sentLast24Hours: sent,
      sendingEnabled: true,
      readAt: new Date(),
    };
  }
}

/** The provider `SES_ACCOUNT_PROVIDER` selects. */
export function createAccountProvider(
  config: Pick<
    MailConfig,
    | 'sesAccountProvider'
    | 'sesRegion'
    | 'sesEndpoint'
    | 'awsCredentials'
    | 'sesTimeoutMs'
    | 'sesLocalMaxSendRate'
    | 'sesLocalMax24HourSend'
  >,
  countSentLast24Hours: () => Promise<number>,
): AccountProvider {
  return config.sesAccountProvider === 'ses'
    ? new SesAccountProvider(config)
    : new LocalAccountProvider(
        { maxSendRate: config.sesLocalMaxSendRate, max24HourSend: config.sesLocalMax24HourSend },
        countSentLast24Hours,
      );
}

/** The send rate when neither the account nor `SES_MAX_SEND_RATE` says one (SES's first production rate). */
export const FALLBACK_SEND_RATE = 14;

/**
 * The send rate the workers keep (emails/s, a whole number ≥ 1, rounded down so it never exceeds the account):
 * the account's maximum send rate, capped by `SES_MAX_SEND_RATE` when that is set. Without an account reading
 * (not read yet, or unreadable): the cap, else {@link FALLBACK_SEND_RATE}.
 */
export function effectiveSendRate(accountRate: number | undefined, cap: number | undefined): number {
  const known = accountRate !== undefined && Number.isFinite(accountRate) && accountRate > 0 ? accountRate : undefined;
  const rate = known === undefined ? (cap ?? FALLBACK_SEND_RATE) : cap === undefined ? known : Math.min(known, cap);
  return Math.max(1, Math.floor(rate));
}

/** Where the 24-hour quota stands for campaigns. */
export interface QuotaState {
  /** Campaigns pause at this many sent in 24 hours: `max24HourSend × (1 − reserve)`, rounded down. */
  pauseAt: number;
  /** Campaigns paused for the quota resume below this: `max24HourSend × (1 − 2 × reserve)`, rounded down. */
  resumeBelow: number;
  /** `sentLast24Hours ≥ pauseAt`: SENDING campaigns must pause. */
  spent: boolean;
  /** `sentLast24Hours < resumeBelow`: campaigns paused for the quota may resume. */
  free: boolean;
  /** Emails left before campaigns pause (0 when spent); `Infinity` for an unlimited quota. */
  remaining: number;
}

/**
 * The quota decision. The last `reserve` of the 24-hour quota is kept for transactional and workflow mail: at
 * `max24HourSend × (1 − reserve)` sent, campaigns pause. They resume only once the count is a further `reserve`
 * below that (hysteresis), so a window that frees a few emails at a time does not pause and resume them on every
 * check. An unlimited quota (`Infinity`) is never spent.
 *
 * @param account - `max24HourSend` and `sentLast24Hours` (emails).
 * @param reserve - `SES_QUOTA_RESERVE`, a fraction in [0, 0.5].
 */
export function quotaState(
  account: Pick<SesAccount, 'max24HourSend' | 'sentLast24Hours'>,
  reserve: number,
): QuotaState {
  if (!Number.isFinite(account.max24HourSend))
    return { pauseAt: Infinity, resumeBelow: Infinity, spent: false, free: true, remaining: Infinity };
  const pauseAt = Math.floor(account.max24HourSend * (1 - reserve));
  const resumeBelow = Math.min(pauseAt, Math.floor(account.max24HourSend * (1 - 2 * reserve)));
  const sent = account.sentLast24Hours;
  return {
    pauseAt,
    resumeBelow,
    spent: sent >= pauseAt,
    free: sent < resumeBelow,
    remaining: Math.max(0, pauseAt - sent),
  };
}
