/**
 * Each delivery connection keeps its own 24-hour quota: a campaign bound to `client-b`, whose account allows 20 a
 * day (5% reserve: campaigns pause at 19), pauses for `quota` there, while a campaign of another project, through
 * `default` (50,000 a day), runs to the end. The worker's metrics show each account's figures under its
 * `connection` label.
 */
import { sql } from 'drizzle-orm';
import { LocalAccountProvider } from '@mailroom/mail/ses-account';
import { setProjectConnection } from '@mailroom/projects/queries/delivery-connections';
import { client, createTestProject, recipient, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({
  env: {
    SES_CONNECTIONS: JSON.stringify([
      { name: 'client-b', region: 'us-east-1', endpoint: process.env.TEST_SES_ENDPOINT },
    ]),
    SES_MAX_SEND_RATE: '20',
    SES_QUOTA_CHECK_MS: '200',
    CAMPAIGN_TICK_MS: '100',
  },
  worker: false,
});
let bound: TestProject;

beforeAll(async () => {
  bound = await createTestProject(e2e.api.database);
  // client-b's account: 20 a day, of which this deployment's sends through it count.
  const sentViaB = async () =>
    (
      await e2e.api.database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where ses_connection = 'client-b' and status = 'sent' and project_id = ${bound.id}::uuid`,
      )
    ).rows[0].n;
  await e2e.startWorker(
    {},
    { accounts: new Map([['client-b', new LocalAccountProvider({ maxSendRate: 20, max24HourSend: 20 }, sentViaB)]]) },
  );
});

async function campaignTo(p: TestProject, n: number, tag: string): Promise<string> {
  const to = Array.from({ length: n }, () => recipient(tag));
  await e2e.api.database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${p.id}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
  const created = await client(e2e.api.app, p).post('/campaigns', {
    name: tag,
    subject: 'News',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">stop</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  return created.body.data.id as string;
}

const campaignRow = async (id: string) =>
  (
    await e2e.api.database.db.execute<{
      status: string;
      paused_reason: string | null;
      pause_details: Record<string, unknown> | null;
    }>(sql`select status, paused_reason, pause_details from campaigns where id = ${id}::uuid`)
  ).rows[0];
const sentBy = async (id: string) =>
  (
    await e2e.api.database.db.execute<{ ses_connection: string; n: number }>(
      sql`select ses_connection, count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'sent' group by 1`,
    )
  ).rows;

test("a connection's quota pauses only the campaigns bound to it", async () => {
  await setProjectConnection(e2e.api.database.db, bound.id, 'client-b');
  const other = await createTestProject(e2e.api.database);
  const onB = await campaignTo(bound, 40, 'cq-b');
  const onDefault = await campaignTo(other, 10, 'cq-d');
  for (const [p, id] of [
    [bound, onB],
    [other, onDefault],
  ] as const)
    expect((await client(e2e.api.app, p).post(`/campaigns/${id}/send`, {})).status).toBe(200);

  await waitFor(async () => (await campaignRow(onB)).status === 'PAUSED', 30_000, 'the client-b campaign PAUSED');
  expect(await campaignRow(onB)).toMatchObject({
    paused_reason: 'quota',
    pause_details: expect.objectContaining({ max24HourSend: 20, pauseAt: 19 }),
  });
  await waitFor(async () => (await campaignRow(onDefault)).status === 'SENT', 30_000, 'the default campaign SENT');
  expect(await sentBy(onDefault)).toEqual([{ ses_connection: 'default', n: 10 }]);
  await waitFor(
    async () =>
      (
        await e2e.api.database.db.execute<{ n: number }>(
          sql`select count(*)::int as n from emails where campaign_id = ${onB}::uuid and status = 'sending'`,
        )
      ).rows[0].n === 0,
    20_000,
    'nothing in flight',
  );
  const [b] = await sentBy(onB);
  expect(b.ses_connection).toBe('client-b');
  // One worker process: the line is held at the send.
  expect(b.n).toBe(19);
  expect((await campaignRow(onB)).status).toBe('PAUSED');

  const metrics = await e2e.worker.metrics.registry.metrics();
  expect(metrics).toMatch(/^mailroom_ses_max_24h_send\{connection="client-b"\} 20$/m);
  expect(metrics).toMatch(/^mailroom_ses_max_24h_send\{connection="default"\} 50000$/m);
  expect(metrics).toMatch(/^mailroom_ses_quota_pause_at\{connection="client-b"\} 19$/m);
  expect(metrics).toMatch(/^mailroom_ses_sent_last_24h\{connection="client-b"\} 19$/m);
}, 60_000);
