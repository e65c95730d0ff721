/**
 * How a failed SES call is treated: throttled (no attempt spent), unreachable (an outage, no attempt spent),
 * transient (retried with backoff) or permanent, by the SES v2 error the SDK (or the lean request) threw, or the one
 * a bulk entry's status stands for (`bulk-send.ts`).
 *
 * @module
 */
/** How the worker must treat a failed send. */
export type SendErrorClass =
  /** Over the account's rate or quota, or sending paused: try again later without spending an attempt. */
  | { kind: 'throttled'; retryInMs: number; reason: string }
  /**
   * SES could not be reached at all (connection refused or reset, DNS, no answer within `SES_TIMEOUT_MS`): an
   * outage, not this message's fault. Try again later without spending an attempt, however long it lasts.
   */
  | { kind: 'unreachable'; reason: string }
  /** SES answered with a 5xx (or something unforeseen happened): retry with backoff, spending an attempt. */
  | { kind: 'transient'; reason: string }
  /** SES refused the message itself: retrying cannot help. */
  | { kind: 'permanent'; reason: string };

const THROTTLED: Record<string, number> = {
  TooManyRequestsException: 1_000,
  ThrottlingException: 1_000,
  Throttling: 1_000,
  LimitExceededException: 60_000,
  // Account-level stops: the mail waits (it is never dropped) until the operator resolves them.
  SendingPausedException: 60_000,
  AccountSuspendedException: 300_000,
};

/** Socket and timeout errors: the request never got an answer from SES. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'TimeoutError',
  'RequestTimeout',
]);

const PERMANENT = new Set([
  'MessageRejected',
  'MailFromDomainNotVerifiedException',
  'NotFoundException',
  'BadRequestException',
  'InvalidParameterValue',
]);

/**
 * Classifies an error thrown by `MailTransport.send` (`transport.ts`), per the SES v2 `SendEmail` error list
 * (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html#API_SendEmail_Errors).
 */
export function classifySendError(err: unknown): SendErrorClass {
  const e = err as {
    name?: string;
    message?: string;
    code?: string;
    $metadata?: { httpStatusCode?: number };
    $retryable?: unknown;
  };
  const name = e.name ?? 'Error';
  const reason = `${name}: ${e.message ?? 'unknown error'}`.slice(0, 1000);
  const throttledMs = THROTTLED[name];
  if (throttledMs !== undefined) return { kind: 'throttled', retryInMs: throttledMs, reason };
  const status = e.$metadata?.httpStatusCode;
  if (status === 429) return { kind: 'throttled', retryInMs: 1_000, reason };
  if (PERMANENT.has(name)) return { kind: 'permanent', reason };
  if (status !== undefined && status >= 400 && status < 500) return { kind: 'permanent', reason };
  if (
    status === undefined &&
    (UNREACHABLE.has(name) ||
      (e.code !== undefined && UNREACHABLE.has(e.code)) ||
      /socket hang up/i.test(e.message ?? ''))
  ) {
    return { kind: 'unreachable', reason };
  }
  return { kind: 'transient', reason };
}
