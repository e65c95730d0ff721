/**
 * The bare ceiling of `npm run bench -- api`: an HTTP server doing only the work `POST /v1/send` and
 * `POST /v1/track` cannot avoid, run in its own process beside the API under the same load, so that the ratio
 * API/ceiling says what the API's own layers (Express, auth, rate limit, validation, logging, metrics, the query
 * builder) cost on this machine.
 *
 * - `POST /v1/send` (one recipient): parse the JSON body, one statement upserting the contact and inserting the
 *   email row, one BullMQ `add` with the email id as job id;
 * - `POST /v1/track`: parse the JSON body, one statement upserting the contact and inserting the event.
 *
 * No auth, no validation, no logging, no timeline row: a floor no real API can reach, which is the point.
 * Environment: `PORT`, `DATABASE_URL`, `REDIS_URL`, `QUEUE_PREFIX`, `PROJECT_ID` (the project written to unless the
 * request names another in `x-project-id`); answers `GET /health/ready`.
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Pool } from 'pg';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { newId } from '@mailroom/platform/ids';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const defaultProjectId = env('PROJECT_ID');
const pool = new Pool({
  connectionString: env('DATABASE_URL'),
  max: Number(process.env.DB_POOL_SIZE ?? 20),
  application_name: 'bench-ceiling',
});
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: null });
const queue = new Queue('bench-ceiling-send', { connection: redis, prefix: env('QUEUE_PREFIX') });

const UPSERT = `insert into contacts (id, project_id, email, email_key, subscribed, data)
  values ($1::uuid, $2::uuid, $3, lower($3), $4::boolean, $5::jsonb)
  on conflict (project_id, email_key) do update set data = contacts.data || excluded.data, updated_at = now()
  returning id`;

const SEND_SQL = `with c as (${UPSERT})
  insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, body_format, variables, status)
  select $6::uuid, $2::uuid, c.id, 'transactional', $3, $7, $8, $9, 'html', $10::jsonb, 'queued' from c
  returning id`;

const TRACK_SQL = `with c as (${UPSERT})
  insert into events (id, project_id, contact_id, name, data)
  select $6::uuid, $2::uuid, c.id, $7, $8::jsonb from c
  returning id`;

function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    req.on('error', reject);
  });
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function send(body: Record<string, unknown>, projectId: string): Promise<unknown> {
  const to = (Array.isArray(body.to) ? body.to[0] : body.to) as string;
  const data = JSON.stringify(body.data ?? {});
  const emailId = newId();
  const r = await pool.query<{ id: string }>(SEND_SQL, [
    newId(),
    projectId,
    to,
    false,
    data,
    emailId,
    body.from,
    body.subject,
    body.body,
    data,
  ]);
  await queue.add('send', { emailId, projectId }, { jobId: emailId, removeOnComplete: true });
  return { emails: [{ email: r.rows[0].id }] };
}

async function track(body: Record<string, unknown>, projectId: string): Promise<unknown> {
  const eventId = newId();
  const data = JSON.stringify(body.data ?? {});
  await pool.query(TRACK_SQL, [newId(), projectId, body.email, true, data, eventId, body.event, data]);
  return { event: eventId };
}

/** The ceiling's handlers, for `bench/express-floor-server.ts` (the same work behind Express). */
export const handlers = {
  routes: { '/v1/send': send, '/v1/track': track } as Record<
    string,
    (body: Record<string, unknown>, projectId: string) => Promise<unknown>
  >,
  defaultProjectId,
  close: async () => {
    await Promise.all([queue.close(), pool.end()]);
    redis.disconnect();
  },
};

if (require.main === module) {
  const server = createServer((req, res) => {
    const handle = req.url === '/v1/send' ? send : req.url === '/v1/track' ? track : undefined;
    if (req.method === 'GET' && req.url === '/health/ready') return answer(res, 200, { ok: true });
    if (req.method !== 'POST' || !handle) return answer(res, 404, { success: false });
    const header = req.headers['x-project-id'];
    const projectId = typeof header === 'string' ? header : defaultProjectId;
    readJson(req)
      .then((body) => handle(body, projectId))
      .then(
        (data) => answer(res, 200, { success: true, data }),
        (err: Error) => answer(res, 500, { success: false, error: err.message }),
      );
  });

  server.listen(Number(env('PORT')), '127.0.0.1');
  process.on('SIGTERM', () => {
    server.close();
    void handlers.close().finally(() => process.exit(0));
  });
}
