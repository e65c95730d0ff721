/**
 * The one rule for the headers of an outgoing message: which custom headers a caller may set, and the header list
 * a message finally carries. Every acceptance route (`POST /v1/send`) checks a request's headers with
 * {@link checkCustomHeaders}; the worker's compose step builds the final list with {@link messageHeaders}, which
 * filters rows stored before this rule existed; a raw message's header list (an SMTP relay) goes through
 * {@link headerProblems} / {@link sanitizeHeaders}. Header names are compared case-insensitively everywhere
 * (RFC 5322 §1.2.2).
 *
 * - Headers the platform or MIME owns are never taken from a caller ({@link isPlatformHeader}): the address and
 *   trace fields, `Subject`, `Date`, `Message-ID`, `MIME-Version`, every `Content-*`, `DKIM-Signature`,
 *   `Feedback-ID`, and every `X-SES-*` (SES reads `X-SES-CONFIGURATION-SET`, `X-SES-MESSAGE-TAGS` and the
 *   `X-SES-*-ARN` fields of a raw message as instructions).
 * - A message carries at most one `List-Unsubscribe` / `List-Unsubscribe-Post` pair (RFC 2369, RFC 8058).
 *   Marketing mail carries the platform's one-click pair; a caller's pair is refused there. Transactional mail may
 *   carry the caller's own pair, taken verbatim in its letter case (`List-Unsubscribe-Post` only beside a
 *   `List-Unsubscribe`, RFC 8058 §3.1); without one, the platform adds its pair when the body links to the
 *   email's unsubscribe URL.
 * - Marketing mail carries the bulk-mail headers {@link BULK_HEADERS} (`Precedence: bulk`, RFC 3834
 *   `Auto-Submitted: auto-generated`, `X-Auto-Response-Suppress: All`); a caller's value for one of them replaces
 *   the default, once.
 * - Each name appears once among a caller's headers (a JSON object can hold `X-A` and `x-a`).
 *
 * @module
 */
import type { FieldError, FieldErrorCode } from '@mailroom/platform/errors';

/** A header list in message order: `[name, value]` pairs, names as written. */
export type HeaderList = ReadonlyArray<readonly [name: string, value: string]>;

/** Header names (lower-case) the platform or MIME sets; a caller may not set them. */
export const PLATFORM_HEADERS: ReadonlySet<string> = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'reply-to',
  'sender',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'return-path',
  'received',
  'dkim-signature',
  'feedback-id',
  // Verdicts and seals of receiving MTAs (RFC 8601, RFC 8617): a sender's copy would only mislead.
  'authentication-results',
]);

/** Name prefixes (lower-case) the platform or MIME owns: MIME's `Content-*`, SES's `X-SES-*`, ARC's `ARC-*`. */
export const PLATFORM_HEADER_PREFIXES: readonly string[] = ['content-', 'x-ses-', 'arc-'];

/** The unsubscribe pair (RFC 2369 / RFC 8058), lower-case. */
export const LIST_UNSUBSCRIBE = 'list-unsubscribe';
export const LIST_UNSUBSCRIBE_POST = 'list-unsubscribe-post';

/** The bulk-mail headers of marketing mail and their default values. */
export const BULK_HEADERS: HeaderList = [
  ['Precedence', 'bulk'],
  ['Auto-Submitted', 'auto-generated'],
  ['X-Auto-Response-Suppress', 'All'],
];

/** Max custom headers per email, max characters of a name and max bytes of one value. */
export const HEADER_LIMITS = { count: 50, nameChars: 100, valueBytes: 2_000 } as const;

/** RFC 5322 §3.6.8 field-name: printable US-ASCII except colon. */
const FIELD_NAME = /^[!-9;-~]+$/;

/** Whether the platform or MIME owns header `name` (any letter case). */
export function isPlatformHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return PLATFORM_HEADERS.has(lower) || PLATFORM_HEADER_PREFIXES.some((p) => lower.startsWith(p));
}

/** Whether `name` (any letter case) is one of the unsubscribe pair. */
export function isListUnsubscribeHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower === LIST_UNSUBSCRIBE || lower === LIST_UNSUBSCRIBE_POST;
}

/** What kind of mail the headers go out on. */
export interface HeaderContext {
  /** Marketing mail (a campaign, a MARKETING template): the platform's unsubscribe pair and bulk headers. */
  marketing: boolean;
}

/** One header a caller may not set, with the reason and the field-error code. */
export interface HeaderProblem {
  /** Position in the list given. */
  index: number;
  name: string;
  message: string;
  code: FieldErrorCode;
}

/**
 * Everything wrong with a caller's header list for mail of `ctx`'s kind: names that are not RFC 5322 field names
 * (or longer than {@link HEADER_LIMITS}`.nameChars`), platform-owned names, a name given twice (any letter case),
 * an unsubscribe pair on marketing mail, a `List-Unsubscribe-Post` without a `List-Unsubscribe`, values with CR,
 * LF or NUL or longer than {@link HEADER_LIMITS}`.valueBytes` bytes (UTF-8), and more than
 * {@link HEADER_LIMITS}`.count` headers (reported with index -1).
 *
 * @returns the problems in list order, empty when the list is acceptable.
 */
export function headerProblems(list: HeaderList, ctx: HeaderContext): HeaderProblem[] {
  const problems: HeaderProblem[] = [];
  if (list.length > HEADER_LIMITS.count) {
    problems.push({ index: -1, name: '', message: `at most ${HEADER_LIMITS.count} headers`, code: 'too_big' });
  }
  const seen = new Set<string>();
  const names = new Set(list.map(([name]) => String(name).toLowerCase()));
  list.forEach(([name, value], index) => {
    const problem = (message: string, code: FieldErrorCode) => problems.push({ index, name, message, code });
    const lower = name.toLowerCase();
    if (!FIELD_NAME.test(name) || name.length > HEADER_LIMITS.nameChars) {
      problem(
        `is not a valid header name (printable ASCII, no colon or space, at most ${HEADER_LIMITS.nameChars} characters)`,
        'invalid_string',
      );
    } else if (isPlatformHeader(name)) {
      problem('is set by the platform and cannot be set by a request (header names are case-insensitive)', 'custom');
    } else if (seen.has(lower)) {
      problem('is given twice (header names are case-insensitive)', 'custom');
    } else if (ctx.marketing && isListUnsubscribeHeader(name)) {
      problem(
        "cannot be set on marketing mail: it carries the platform's one-click List-Unsubscribe pair (RFC 8058)",
        'custom',
      );
    } else if (lower === LIST_UNSUBSCRIBE_POST && !names.has(LIST_UNSUBSCRIBE)) {
      problem('needs a List-Unsubscribe header beside it (RFC 8058 §3.1)', 'custom');
    } else if (typeof value !== 'string') {
      problem('must be a string', 'invalid_type');
    } else if (/[\r\n\0]/.test(value)) {
      problem('must not contain line breaks or NUL', 'invalid_string');
    } else if (Buffer.byteLength(value) > HEADER_LIMITS.valueBytes) {
      problem(`must be at most ${HEADER_LIMITS.valueBytes} bytes`, 'too_big');
    }
    seen.add(lower);
  });
  return problems;
}

/**
 * Checks the custom headers of a request (an object of name → value) for mail of `ctx`'s kind.
 *
 * @returns field errors naming each header as given (`headers.X-SES-Source-Arn`), empty when all are acceptable.
 */
export function checkCustomHeaders(headers: Record<string, unknown>, ctx: HeaderContext): FieldError[] {
  return headerProblems(Object.entries(headers) as [string, string][], ctx).map((p) => ({
    field: p.index < 0 ? 'headers' : `headers.${p.name}`,
    message: p.message,
    code: p.code,
  }));
}

/** A header {@link sanitizeHeaders} left out, and why. */
export interface DroppedHeader {
  name: string;
  reason: string;
}

/**
 * The headers of `list` that {@link headerProblems} accepts, in order; the others are dropped with their reason.
 * For a list that was never checked (rows stored before the rule, a raw message's headers): nothing the platform
 * owns gets through.
 */
export function sanitizeHeaders(
  list: HeaderList,
  ctx: HeaderContext,
): { kept: [string, string][]; dropped: DroppedHeader[] } {
  const problems = headerProblems(list, ctx);
  const bad = new Map(problems.filter((p) => p.index >= 0).map((p) => [p.index, p.message]));
  const kept: [string, string][] = [];
  const dropped: DroppedHeader[] = [];
  list.forEach(([name, value], index) => {
    const reason = bad.get(index);
    if (reason) dropped.push({ name, reason });
    else if (kept.length >= HEADER_LIMITS.count) dropped.push({ name, reason: `over ${HEADER_LIMITS.count} headers` });
    else kept.push([name, value]);
  });
  return { kept, dropped };
}

/**
 * The header list a message carries beside the ones the MIME builder writes: the caller's accepted headers
 * ({@link sanitizeHeaders}), then, for marketing mail, the bulk-mail defaults the caller did not set and the
 * platform's unsubscribe pair; for transactional mail, the platform's pair only when the caller gave none and the
 * body links to the unsubscribe URL.
 *
 * @param custom - the caller's headers (a stored row's object, or a raw message's list).
 * @param ctx.unsubscribeUrl - this email's HTTPS unsubscribe URL (the one-click target, RFC 8058).
 * @param ctx.bodyLinksUnsubscribe - the rendered body contains that URL.
 */
export function messageHeaders(
  custom: HeaderList | Record<string, string>,
  ctx: HeaderContext & { unsubscribeUrl: string; bodyLinksUnsubscribe: boolean },
): { headers: [string, string][]; dropped: DroppedHeader[] } {
  const list = Array.isArray(custom) ? (custom as HeaderList) : (Object.entries(custom) as [string, string][]);
  const { kept, dropped } = sanitizeHeaders(list, ctx);
  const given = new Set(kept.map(([name]) => name.toLowerCase()));
  const headers = [...kept];
  if (ctx.marketing) {
    for (const [name, value] of BULK_HEADERS) if (!given.has(name.toLowerCase())) headers.push([name, value]);
  }
  if (ctx.marketing || (!given.has(LIST_UNSUBSCRIBE) && ctx.bodyLinksUnsubscribe))
    headers.push(...listUnsubscribeHeaders(ctx.unsubscribeUrl));
  return { headers, dropped };
}

/**
 * The platform's RFC 2369 / RFC 8058 pair: `List-Unsubscribe` with the HTTPS URL and
 * `List-Unsubscribe-Post: List-Unsubscribe=One-Click`, so mailbox providers can unsubscribe with one POST.
 */
export function listUnsubscribeHeaders(url: string): [string, string][] {
  return [
    ['List-Unsubscribe', `<${url}>`],
    ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
  ];
}
