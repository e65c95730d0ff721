/**
 * SMTP replies of the relay (RFC 5321 §4.2 reply codes with RFC 3463 enhanced status codes; RFC 4954 §6 for
 * `AUTH`): what each refusal of the shared domain functions becomes on the wire.
 *
 * @module
 */
import { AppError, ErrorCode, isUnavailableError } from '@mailroom/platform/errors';

/** An error smtp-server answers with `responseCode` and its message (the enhanced code leads the text). */
export interface SmtpReply extends Error {
  responseCode: number;
}

/** A reply of `code` with the enhanced status `enhanced` (RFC 3463) and `text`. */
export function reply(code: number, enhanced: string, text: string): SmtpReply {
  // The server runs with smtp-server's own enhanced codes off (they are chosen by reply code alone: 550 would say
  // 5.1.1 "bad mailbox" for a refused sender); each reply of ours carries the code that says what happened.
  return Object.assign(new Error(`${enhanced} ${text.replace(/[\r\n]+/g, ' ')}`), { responseCode: code });
}

/** Authentication failed: a key that is unknown, malformed, expired, revoked, or public (RFC 4954 §6: 535 5.7.8). */
export const badCredentials = (detail = 'Authentication credentials invalid') => reply(535, '5.7.8', detail);

/** A temporary failure the client should retry (the message was not accepted; nothing was stored). */
export const tryLater = (text = 'Temporary failure, try again later') => reply(451, '4.3.0', text);

/**
 * What an error of `AUTH` becomes: 454 4.7.0 for a client over its failed-authentication limit or a backing service
 * down (RFC 4954 §6 "temporary authentication failure"), 535 5.7.8 for bad credentials, 554 5.7.1 for a disabled
 * project.
 */
export function authReply(err: unknown): SmtpReply {
  if (err instanceof AppError) {
    if (err.code === ErrorCode.RATE_LIMITED)
      return reply(454, '4.7.0', `${err.message}; retry in ${err.options.headers?.['Retry-After'] ?? '60'} s`);
    if (err.code === ErrorCode.PROJECT_DISABLED) return reply(554, '5.7.1', err.message);
    if (err.code === ErrorCode.UNAUTHORIZED) return badCredentials();
    if (err.code !== ErrorCode.SERVICE_UNAVAILABLE && err.statusCode < 500) return badCredentials(err.message);
  }
  return reply(454, '4.7.0', 'Temporary authentication failure, try again later');
}

/**
 * What a refusal of a message (end of DATA) becomes. Refusals the client can only fix by changing the message are
 * permanent (550 5.7.1 for a sender the project or the key may not use, 554 5.6.0 for an unreadable message);
 * anything else is temporary (451: over the rate limit, Postgres or Redis unreachable, anything unexpected), so a
 * message is never lost to a reply that said it was refused for good when it was not its fault.
 */
export function dataReply(err: unknown): SmtpReply {
  if (err instanceof AppError) {
    switch (err.code) {
      case ErrorCode.KEY_DOMAIN_FORBIDDEN:
      case ErrorCode.KEY_SCOPE_FORBIDDEN:
      case ErrorCode.PROJECT_DISABLED:
        return reply(550, '5.7.1', err.message);
      case ErrorCode.IDEMPOTENCY_CONFLICT:
        return reply(550, '5.7.0', err.message);
      case ErrorCode.RATE_LIMITED:
        return reply(451, '4.7.1', `${err.message}; retry in ${err.options.headers?.['Retry-After'] ?? '60'} s`);
      case ErrorCode.VALIDATION_ERROR: {
        const first = err.options.errors?.[0];
        if (first?.field === 'from') return reply(550, '5.7.1', `Sender refused: ${first.message}`);
        return reply(554, '5.6.0', `Message refused: ${err.message}`);
      }
      default:
        break;
    }
  }
  if (isUnavailableError(err)) return tryLater('Temporary failure (storage unavailable), try again later');
  return tryLater();
}
