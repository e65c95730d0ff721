/**
 * The typed client's retries against a running API whose per-project rate limit is 2 requests a minute: a 429's
 * `Retry-After` is honoured, a POST is retried only with an idempotency key, a wait longer than allowed is not
 * taken, and network failures are retried with bounded, jittered backoff. The client's clock (`sleep`) is
 * injected: it records each wait and, instead of waiting out the minute, clears the limiter's window in Redis.
 */
import net from 'node:net';
import { createMailroomClient, type MailroomClient } from '@mailroom/client/client';
import { MailroomError, unwrap } from '@mailroom/client/errors';
import { withIdempotencyKey } from '@mailroom/client/idempotency';
import { parseRetryAfter, type RetryOptions } from '@mailroom/client/retry';
import { createTestProject, deletePrefix, recipient, type TestProject } from '../support/harness';
import { serveApi, type ServedApi } from './support';

let served: ServedApi;
beforeAll(async () => {
  served = await serveApi({ RATE_LIMIT_PER_MINUTE: '2' });
});
afterAll(async () => {
  await served?.close();
});

interface Recorded {
  client: MailroomClient;
  /** Each attempt: `METHOD path → status` (or `→ network error`). */
  attempts: string[];
  /** Each wait the client asked for, in ms. */
  waits: number[];
}

/** A client of `project` whose waits are recorded and end the rate-limit window instead of sleeping. */
function recordedClient(project: TestProject, retry: RetryOptions = {}, baseUrl = served.baseUrl): Recorded {
  const attempts: string[] = [];
  const waits: number[] = [];
  const client = createMailroomClient({
    apiKey: project.secretKey,
    baseUrl,
    retry: {
      random: () => 0.5,
      sleep: async (ms) => {
        waits.push(ms);
        await deletePrefix(served.api.redis, `${served.api.config.queuePrefix}:ratelimit`);
      },
      ...retry,
    },
    fetch: async (request) => {
      const what = `${request.method} ${new URL(request.url).pathname}`;
      try {
        const response = await fetch(request);
        attempts.push(`${what} → ${response.status}`);
        return response;
      } catch (err) {
        attempts.push(`${what} → network error`);
        throw err;
      }
    },
  });
  return { client, attempts, waits };
}

/** Uses up the project's 2 requests of this minute. */
async function exhaust(project: TestProject): Promise<void> {
  const plain = createMailroomClient({ apiKey: project.secretKey, baseUrl: served.baseUrl, retry: false });
  for (let i = 0; i < 2; i++) unwrap(await plain.GET('/templates', { params: { query: { limit: 1 } } }));
  const refused = await plain.GET('/templates', { params: { query: { limit: 1 } } });
  expect(refused.response.status).toBe(429);
}

test('a GET that meets 429 waits for Retry-After (plus jitter) and is sent again', async () => {
  const project = await createTestProject(served.api.database);
  await exhaust(project);
  const { client, attempts, waits } = recordedClient(project, { baseDelayMs: 100, maxDelayMs: 120_000 });
  const res = await client.GET('/templates', { params: { query: { limit: 1 } } });
  expect(res.response.status).toBe(200);
  expect(attempts).toEqual(['GET /templates → 429', 'GET /templates → 200']);
  expect(waits).toHaveLength(1);
  // Retry-After is whole seconds (1–60) of the fixed minute window; jitter adds at most one base delay.
  expect(waits[0] % 1000).toBe(50);
  expect(waits[0]).toBeGreaterThanOrEqual(1000);
  expect(waits[0]).toBeLessThanOrEqual(60_050);
});

test('a POST without an idempotency key is never retried; with one it is', async () => {
  const project = await createTestProject(served.api.database);
  await exhaust(project);
  const { client, attempts, waits } = recordedClient(project, { maxDelayMs: 120_000 });
  const body = { to: recipient('retry'), subject: 's', body: 'b', from: `a@${project.domain}` };

  const refused = await client.POST('/v1/send', { body });
  expect(refused.response.status).toBe(429);
  expect(refused.response.headers.get('Retry-After')).toMatch(/^\d+$/);
  expect(refused.error).toMatchObject({ code: 'RATE_LIMITED' });
  expect(new MailroomError(429, refused.error)).toMatchObject({ code: 'RATE_LIMITED', retryable: true });
  expect(attempts).toEqual(['POST /v1/send → 429']);
  expect(waits).toEqual([]);

  const sent = await client.POST('/v1/send', { params: { header: withIdempotencyKey() }, body });
  expect(sent.response.status).toBe(202);
  expect(unwrap(sent).emails).toHaveLength(1);
  expect(attempts).toEqual(['POST /v1/send → 429', 'POST /v1/send → 429', 'POST /v1/send → 202']);
  expect(waits).toHaveLength(1);
});

test('a Retry-After longer than maxDelayMs is not waited for: the 429 is answered', async () => {
  const project = await createTestProject(served.api.database);
  await exhaust(project);
  const { client, attempts, waits } = recordedClient(project, { maxDelayMs: 500 });
  const res = await client.GET('/templates', { params: { query: { limit: 1 } } });
  expect(res.response.status).toBe(429);
  expect(attempts).toHaveLength(1);
  expect(waits).toEqual([]);
});

test('network failures: a GET is tried maxAttempts times with growing, jittered backoff; a bare POST once', async () => {
  // A loopback port nobody listens on: every connection is refused.
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const project = served.project;
  const { client, attempts, waits } = recordedClient(
    project,
    { maxAttempts: 3, baseDelayMs: 200 },
    `http://127.0.0.1:${port}`,
  );
  await expect(client.GET('/templates', { params: { query: { limit: 1 } } })).rejects.toThrow();
  expect(attempts).toEqual([
    'GET /templates → network error',
    'GET /templates → network error',
    'GET /templates → network error',
  ]);
  // Full jitter with random() = 0.5: half of 200 · 2^(attempt-1).
  expect(waits).toEqual([100, 200]);

  attempts.length = 0;
  await expect(client.POST('/contacts', { body: { email: recipient('net') } })).rejects.toThrow();
  expect(attempts).toEqual(['POST /contacts → network error']);
});

test('Retry-After is read as delay-seconds or as an HTTP-date (RFC 9110 §10.2.3)', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  expect(parseRetryAfter('7', now)).toBe(7000);
  expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
  expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
  expect(parseRetryAfter('soon', now)).toBeUndefined();
  expect(parseRetryAfter(null, now)).toBeUndefined();
});
