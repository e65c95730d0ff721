/**
 * The bare ceiling of `npm run bench -- worker`: a process doing only the work a send cannot avoid, run against the
 * same emulator, Postgres and Redis as the worker, on emails enqueued the same way, so that the ratio
 * worker/ceiling says what the worker's own layers (claim, suppression and project checks, rendering, MIME, the
 * AWS SDK and its signing, the rate gate, the finish with its timeline, counters and webhooks, logging) cost on
 * this machine.
 *
 * Per email: one BullMQ job taken from the `send` queue (a `Worker` with `CONCURRENCY` jobs at once, no limiter),
 * one SES v2 `SendEmail` to `SES_ENDPOINT` with a raw MIME message built once at start (plain `node:http`, a
 * keep-alive agent, a fixed Authorization header: no signing), and one `UPDATE` of the email row to `sent` with the SES message id.
 * Environment: `DATABASE_URL`, `REDIS_URL`, `QUEUE_PREFIX`, `SES_ENDPOINT`, `CONCURRENCY` (default 32).
 *
 * @module
 */
import http from 'node:http';
import { Pool } from 'pg';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const concurrency = Number(process.env.CONCURRENCY ?? 32);
const pool = new Pool({ connectionString: env('DATABASE_URL'), max: 20, application_name: 'bench-worker-ceiling' });
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: null });
const ses = new URL('/v2/email/outbound-emails', env('SES_ENDPOINT'));
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

const raw = Buffer.from(
  [
    'From: w@ceiling.example.com',
    'To: someone@bench.test',
    'Subject: Hi Ann',
    'Message-ID: <ceiling@ceiling.example.com>',
    'MIME-Version: 1.0',
    'Content-Type: multipart/alternative; boundary="b"',
    '',
    '--b',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Hello Ann',
    '--b',
    'Content-Type: text/html; charset=utf-8',
    '',
    '<p>Hello Ann</p>',
    '--b--',
    '',
  ].join('\r\n'),
);
const body = JSON.stringify({
  FromEmailAddress: 'w@ceiling.example.com',
  Destination: { ToAddresses: ['someone@bench.test'] },
  Content: { Raw: { Data: raw.toString('base64') } },
});

/** The emulator wants an `AWS…` Authorization header and checks nothing in it: a fixed one, nothing signed. */
const AUTHORIZATION =
  'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/ses/aws4_request, SignedHeaders=host, Signature=0';

function sendEmail(): Promise<string> {
  return new Promise((resolve, reject) => {
    const headers = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      authorization: AUTHORIZATION,
    };
    const req = http.request(ses, { method: 'POST', agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`SES answered ${res.statusCode}`));
        resolve((JSON.parse(Buffer.concat(chunks).toString()) as { MessageId: string }).MessageId);
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const worker = new Worker<{ emailId: string }>(
  'send',
  async (job) => {
    const messageId = await sendEmail();
    await pool.query(
      `update emails set status = 'sent', message_id = $2, sent_at = now(), updated_at = now() where id = $1::uuid`,
      [job.data.emailId, messageId],
    );
  },
  { connection: redis, prefix: env('QUEUE_PREFIX'), concurrency },
);
worker.on('error', () => undefined);

process.on('SIGTERM', () => {
  void Promise.all([worker.close(), pool.end()]).finally(() => {
    redis.disconnect();
    process.exit(0);
  });
});
