/**
 * docs/api/errors.md: every error code with its HTTP status, whether a retry can succeed and what a client should
 * do, from the error catalog (`errorCatalog` in packages/platform/src/errors.ts).
 *
 * @module
 */
import { errorCatalog, type ErrorCode } from '@mailroom/platform/errors';
import { GENERATED_NOTICE } from './notice';

/** docs/api/errors.md's text. */
export function errorsMarkdown(): string {
  const codes = (Object.keys(errorCatalog) as ErrorCode[]).sort((a, b) => errorCatalog[a].status - errorCatalog[b].status);
  const rows = codes.map((code) => {
    const e = errorCatalog[code];
    return `| \`${code}\` | ${e.status} | ${e.retryable ? 'yes' : 'no'} | ${e.meaning} | ${e.action} |`;
  });
  return `# Errors

${GENERATED_NOTICE('the error catalog, `errorCatalog` in packages/platform/src/errors.ts')}

Every error answers with the same body:

\`\`\`json
{
  "success": false,
  "error": {
    "code": "VALIDATION_ERROR",
    "message": "to.0.email: must match format \\"email\\"",
    "statusCode": 422,
    "retryable": false,
    "requestId": "0190a6e5-7c1e-7d3a-9c1b-5d2f3e4a5b6c",
    "errors": [{ "field": "to.0.email", "message": "must match format \\"email\\"", "code": "invalid_string" }],
    "suggestion": "Correct the fields listed in error.errors and retry."
  },
  "code": "VALIDATION_ERROR",
  "message": "to.0.email: must match format \\"email\\"",
  "timestamp": "2026-01-01T09:00:00.000Z"
}
\`\`\`

- \`error.code\` is the machine-readable code below; it never changes meaning. \`code\` and \`message\` are repeated at
  the top level for Plunk SDKs.
- \`error.retryable\` says whether the same request, sent again unchanged, can succeed: true for rate limits and
  server-side failures, false when the request itself is the problem. Wait \`Retry-After\` seconds when the response
  carries that header; otherwise back off exponentially. Send writes with an \`Idempotency-Key\` so that a retry never
  acts twice.
- \`error.errors\` lists the fields at fault (\`{field, message, code}\`, \`field\` a dotted path such as \`to.0.email\`), on
  \`VALIDATION_ERROR\` and on some \`INVALID_PARAMETERS\` and \`BAD_REQUEST\` answers.
- \`error.requestId\` is also the \`X-Request-Id\` response header; quote it when reporting a problem.
- A failed request changes nothing.

| Code | HTTP status | Retryable | When | What to do |
| --- | --- | --- | --- | --- |
${rows.join('\n')}
`;
}
