/**
 * `npm run bench -- feedback`: SNS notifications processed per second at `POST /webhooks/ses`, signature check
 * included (SignatureVersion 2, RSA-2048, certificate cached after the first fetch), for fresh notifications
 * (Delivery then Open of distinct emails: status move, timeline entry, contact event, one webhook delivery each)
 * and for redeliveries of the same messages (recognised by SNS message id, no effect).
 *
 * BENCH_FEEDBACK_EVENTS sets the number of notifications (default 10,000). The API runs in its own process.
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { sql } from 'drizzle-orm';
import type { Config } from '@mailroom/config/config';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import { type Database } from '@mailroom/db/client';
import { freePort, waitForHttp } from '../test/support/services';
import { sesEvent, startSnsHarness } from '../test/support/sns';

type Spawn = (file: string, env: Record<string, string>) => ChildProcess;

/** Runs the benchmark and prints its table. @returns the rows. */
export async function benchFeedback(
  env: Record<string, string>,
  _config: Config,
  database: Database,
  p: { id: string; domain: string },
  spawnApp: Spawn,
  stop: (c: ChildProcess) => Promise<void>,
): Promise<Record<string, string | number>[]> {
  const total = Number(process.env.BENCH_FEEDBACK_EVENTS ?? 10_000);
  const emailsCount = Math.ceil(total / 2);
  const sns = await startSnsHarness();
  const tag = Date.now().toString(36);

  // Emails already handed to SES, each with its contact and SES message id.
  await database.db.execute(sql`
    with c as (
      insert into contacts (id, project_id, email, email_key, subscribed)
      select mailroom_uuid_v7(clock_timestamp()), ${p.id}::uuid, 'fb' || i || '-' || ${tag} || '@bench.test', 'fb' || i || '-' || ${tag} || '@bench.test', true
      from generate_series(1, ${emailsCount}) i
      returning id, email
    )
    insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, body_format, status, message_id, sent_at)
    select mailroom_uuid_v7(clock_timestamp()), ${p.id}::uuid, c.id, 'transactional', c.email, 'n@' || ${p.domain}, 'S', 'B', 'html', 'sent',
      'bench-' || ${tag} || '-' || c.email, now()
    from c
  `);
  await createWebhookEndpoint(database.db, p.id, {
    url: 'https://hooks.example.com/mail',
    eventTypes: ['email.*'],
    secret: 'whsec_' + Buffer.alloc(32, 1).toString('base64'),
  });

  // SES publishes each event with the message's tags: the worker tags every send with its email and project id.
  const ids = new Map(
    (
      await database.db.execute<{ id: string; to_email: string }>(
        sql`select id, to_email from emails where project_id = ${p.id}::uuid and message_id like ${`bench-${tag}-%`}`,
      )
    ).rows.map((r) => [r.to_email, r.id]),
  );
  const signStarted = performance.now();
  const bodies: string[] = [];
  for (const type of ['Delivery', 'Open'] as const) {
    for (let i = 1; i <= emailsCount && bodies.length < total; i++) {
      const to = `fb${i}-${tag}@bench.test`;
      const event = sesEvent(type, { messageId: `bench-${tag}-${to}`, to, emailId: ids.get(to), projectId: p.id });
      bodies.push(JSON.stringify(sns.notification(event, { version: '2' })));
    }
  }
  const signSeconds = (performance.now() - signStarted) / 1000;

  const port = await freePort();
  const api = spawnApp('apps/api/src/server.ts', {
    ...env,
    PORT: String(port),
    SNS_TOPIC_ARNS: sns.topicArn,
    SNS_CERT_HOSTS: sns.certHost,
  });
  await waitForHttp(`http://127.0.0.1:${port}/health/ready`, 30_000);
  const rows: Record<string, string | number>[] = [];
  try {
    for (const run of ['fresh notifications', 'redeliveries (same message ids)'] as const) {
      let next = 0;
      const result = await autocannon({
        url: `http://127.0.0.1:${port}/webhooks/ses`,
        connections: 10,
        amount: bodies.length,
        requests: [
          {
            method: 'POST',
            headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' },
            setupRequest: (req) => ({ ...req, body: bodies[next++ % bodies.length] }),
          },
        ],
      });
      rows.push({
        run,
        notifications: result.requests.total,
        'per second': Math.round(result.requests.total / (result.duration || 1)),
        'p50 ms': result.latency.p50,
        'p99 ms': result.latency.p99,
        non2xx: result.non2xx,
      });
    }
    const counts = await database.db.execute<{ delivered: number; opened: number; deliveries: number }>(sql`
      select count(*) filter (where delivered_at is not null)::int as delivered, count(*) filter (where open_count = 1)::int as opened,
        (select count(*)::int from webhook_deliveries where project_id = ${p.id}::uuid) as deliveries
      from emails where project_id = ${p.id}::uuid and message_id like ${`bench-${tag}-%`}
    `);
    const c = counts.rows[0];
    rows.push({
      run: `check: delivered ${c.delivered}, opened once ${c.opened}, webhook deliveries ${c.deliveries}`,
      notifications: '',
      'per second': '',
      'p50 ms': '',
      'p99 ms': '',
      non2xx: '',
    });
  } finally {
    await stop(api);
    await sns.close();
  }
  console.log(
    `\nPOST /webhooks/ses (${total} notifications, 10 connections, API in one process; signing them in the client took ${signSeconds.toFixed(1)} s)`,
  );
  console.table(rows);
  return rows;
}
