/**
 * `GET /emails/{id}/raw`: the MIME message (RFC 5322, `message/rfc822`) a test email delivered to the test sink,
 * byte for byte what SES would have been given. It answers a body that is not JSON, so it is mounted here rather
 * than declared with `route()`, and documented by {@link emailRawOpenApiPaths}.
 *
 * - a test email that was sent: 200 with the message;
 * - a test email with no message (still queued or sending; or suppressed, cancelled or failed): 409 `INVALID_STATE`;
 * - a test email sent more than `TEST_MESSAGE_RETENTION_HOURS` ago, whose message the worker's retention pass
 *   deleted: 404 `NOT_FOUND` saying the message expired (the API's error codes have no 410; a 404 with that message
 *   tells a client the same: it will never come back);
 * - a live email: 404 `NOT_FOUND` saying that live emails keep no copy (their message went to SES);
 * - an unknown id, or an email of another project: 404 `NOT_FOUND`.
 *
 * @module
 */
import type { Request, RequestHandler, Response, Router } from 'express';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { paramValidator } from '@mailroom/platform/validation';
import { getTestMessage } from '@mailroom/sending/queries/test-messages';
import type { AppDeps } from '../http/context';
import { IdParams } from './common';

/**
 * Mounts `GET /emails/{id}/raw` behind `auth` (the secret-key chain: authentication, then the project's rate limit).
 *
 * @throws {@link AppError} (to the error middleware) 400 `INVALID_PARAMETERS` (id not a UUID), 404, 409 `INVALID_STATE`.
 */
export function mountEmailRaw(router: Router, deps: AppDeps, auth: RequestHandler[]): void {
  const validateParams = paramValidator(IdParams);
  router.get('/emails/:id/raw', ...auth, async (req: Request, res: Response) => {
    const { id } = validateParams({ ...req.params });
    const found = await getTestMessage(deps.database.db, res.locals.auth!.projectId, id);
    if (found.found === 'none') throw notFound('Email');
    if (found.found === 'live') {
      throw new AppError(
        ErrorCode.NOT_FOUND,
        'No raw message for a live email: live emails keep no copy of the message sent to SES',
        {
          suggestion: 'Only test emails (sent with a test key, sk_test_…) keep their MIME message.',
        },
      );
    }
    if (found.found === 'expired') {
      const hours = deps.config.testMessageRetentionHours;
      throw new AppError(
        ErrorCode.NOT_FOUND,
        `The message of this test email has expired: test messages are kept ${hours} hours (TEST_MESSAGE_RETENTION_HOURS)`,
        {
          suggestion: 'Read GET /emails/{id}/raw within the retention period, or send the test email again.',
        },
      );
    }
    if (found.found === 'pending') {
      throw new AppError(ErrorCode.INVALID_STATE, `This test email has no message: it is ${found.status}`, {
        suggestion:
          found.status === 'queued' || found.status === 'sending'
            ? 'Try again once GET /emails/{id} shows it sent.'
            : 'It will never have one.',
      });
    }
    res
      .status(200)
      .set({ 'Cache-Control': 'private, no-store', 'Content-Disposition': `inline; filename="${id}.eml"` })
      .type('message/rfc822')
      .send(found.raw);
  });
}

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/** OpenAPI paths of `GET /emails/{id}/raw` (it answers `message/rfc822`, so it is not declared with `route()`). */
export const emailRawOpenApiPaths = {
  '/emails/{id}/raw': {
    get: {
      operationId: 'getEmailRaw',
      summary: 'The MIME message of a test email (message/rfc822)',
      description:
        'A test email (made with a test key, sk_test_…) is built exactly as a live one (same rendering, same MIME composer, ' +
        'same Message-ID) and stored in the test sink instead of reaching SES; this returns those bytes. Live emails keep no ' +
        'copy of their message: 404 with a message saying so. Test messages are kept TEST_MESSAGE_RETENTION_HOURS after they ' +
        'were stored (default 168 = 7 days); after that this answers 404 with a message saying it expired.',
      tags: ['Sending'],
      security: [{ apiKey: [] }],
      parameters: [
        { name: 'id', in: 'path', required: true, description: 'email id', schema: { type: 'string', format: 'uuid' } },
      ],
      responses: {
        200: {
          description: 'The RFC 5322 message, byte for byte',
          content: { 'message/rfc822': { schema: { type: 'string', format: 'binary' } } },
        },
        400: errorResponse('The id is not a UUID (INVALID_PARAMETERS)'),
        401: errorResponse('Missing, malformed, unknown, expired or revoked API key (UNAUTHORIZED)'),
        403: errorResponse('Public key, or project disabled (PUBLIC_KEY_NOT_ALLOWED, PROJECT_DISABLED)'),
        404: errorResponse(
          'Unknown id, an email of another project, a live email (live emails keep no copy), or a test email whose message expired ' +
            '(kept TEST_MESSAGE_RETENTION_HOURS after it was stored) (NOT_FOUND)',
        ),
        409: errorResponse(
          'A test email with no message: not sent yet (queued, sending), or never (suppressed, cancelled, failed) (INVALID_STATE)',
        ),
        429: errorResponse('Rate limit exceeded; see Retry-After (RATE_LIMITED)'),
        500: errorResponse('Unexpected error (INTERNAL_ERROR); 503 when a backing service is down'),
      },
    },
  },
};
