/**
 * The SMTP relay with real clients (nodemailer; Python's smtplib for one send) against an in-process relay on
 * STARTTLS, implicit-TLS and local plain ports: authentication with secret keys, the same acceptance as
 * `POST /v1/send` (verified sender, key domains, contacts, test keys, suppression), the platform's headers, the
 * limits answered with SMTP codes, idempotent re-submission, and 451 (never 250) when Postgres drops mid-session.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { simpleParser } from 'mailparser';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues } from '@mailroom/queues/create';
import {
  ADMIN_TOKEN,
  createTestProject,
  recipient,
  startTestApi,
  testConfig,
  waitReady,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { cuttableProxy, smtpClient, smtpEnv, startTestRelay, type TestRelay } from '../support/smtp';

let api: TestApi;
let relay: TestRelay;
let p: TestProject;

beforeAll(async () => {
  api = await startTestApi(testConfig(await smtpEnv()));
  relay = await startTestRelay(api);
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await relay?.close();
  await api?.close();
});

/** The project's emails to `addresses`, with the stored message of each. */
async function emailsTo(projectId: string, addresses: string[]) {
  const r = await api.database.pool.query<{
    id: string;
    to_email: string;
    status: string;
    test: boolean;
    body_format: string;
    subject: string;
    from_email: string;
    raw: Buffer | null;
  }>(
    `select e.id, e.to_email, e.status, e.test, e.body_format, e.subject, e.from_email, a.content as raw
       from emails e left join attachments a on a.id = e.attachment_ids[1]
      where e.project_id = $1 and e.to_email = any($2) order by e.to_email`,
    [projectId, addresses],
  );
  return r.rows;
}

const message = (from: string, to: string[], extra: Record<string, unknown> = {}) => ({
  from,
  to,
  subject: `Hello ${randomBytes(3).toString('hex')}`,
  text: 'plain body',
  html: '<p>html body</p>',
  ...extra,
});

describe('happy path', () => {
  test('STARTTLS on the submission port: To, Cc and Bcc each get an email; Bcc and X-SES-* are not in the stored message; contacts upserted', async () => {
    const [to, cc, bcc] = [recipient('to'), recipient('cc'), recipient('bcc')];
    const info = await smtpClient(relay.starttlsPort, p.secretKey).sendMail(
      message(`Ann <ann@${p.domain}>`, [to], {
        cc,
        bcc,
        headers: {
          'X-SES-CONFIGURATION-SET': 'someone-elses',
          'X-Custom': 'kept',
          Sender: 'ceo@victim.example.org',
          'Feedback-ID': 'x:victim:ses',
          'DKIM-Signature': 'v=1; d=victim.example.org; b=forged',
          'Authentication-Results': 'mx.example; dkim=pass',
          'ARC-Seal': 'i=1; cv=none; b=forged',
        },
      }),
    );
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as </);
    expect(info.accepted.sort()).toEqual([to, cc, bcc].sort());
    const rows = await emailsTo(p.id, [to, cc, bcc]);
    expect(rows.map((r) => r.to_email).sort()).toEqual([to, cc, bcc].sort());
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'queued', test: false, body_format: 'mime', from_email: `ann@${p.domain}` });
      const parsed = await simpleParser(row.raw!);
      expect(parsed.headers.has('bcc')).toBe(false);
      expect(parsed.headers.has('x-ses-configuration-set')).toBe(false);
      for (const h of ['sender', 'feedback-id', 'dkim-signature', 'authentication-results', 'arc-seal'])
        expect({ h, has: parsed.headers.has(h) }).toEqual({ h, has: false });
      expect(parsed.headers.get('x-custom')).toBe('kept');
      expect(parsed.text?.trim()).toBe('plain body');
      expect(row.raw!.toString()).not.toContain(bcc);
    }
    // One stored message for all recipients.
    expect(new Set(rows.map((r) => r.raw!.toString('base64'))).size).toBe(1);
    const contacts = await api.database.pool.query(
      'select email from contacts where project_id = $1 and email = any($2)',
      [p.id, [to, cc, bcc]],
    );
    expect(contacts.rowCount).toBe(3);
  });

  test('implicit TLS on the TLS port; the email is readable through the API', async () => {
    const to = recipient();
    const info = await smtpClient(relay.tlsPort, p.secretKey, { secure: true }).sendMail(
      message(`ann@${p.domain}`, [to]),
    );
    expect(info.response).toMatch(/^250 /);
    const [row] = await emailsTo(p.id, [to]);
    const res = await request(api.app).get(`/emails/${row.id}`).set('Authorization', p.auth);
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('queued');
  });

  test('a test key (sk_test_) makes test emails; a send-only key works; Python smtplib sends with STARTTLS', async () => {
    const created = await request(api.app)
      .post('/admin/projects')
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ name: 'smtp-test-key' });
    const testKey = created.body.data.testSecretKey as string;
    await request(api.app)
      .post(`/admin/projects/${created.body.data.id}/domains`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ domain: `t${p.domain}`, verified: true });
    const to = recipient();
    await smtpClient(relay.starttlsPort, testKey).sendMail(message(`a@t${p.domain}`, [to]));
    expect((await emailsTo(created.body.data.id, [to]))[0]).toMatchObject({ test: true, status: 'queued' });

    const scoped = await request(api.app)
      .post(`/admin/projects/${p.id}/keys`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ scope: 'sending', domains: [p.domain] });
    const to2 = recipient('py');
    const script = [
      'import smtplib, ssl, sys',
      'from email.message import EmailMessage',
      'm = EmailMessage(); m["From"] = sys.argv[3]; m["To"] = sys.argv[4]; m["Subject"] = "from python"; m.set_content("hi")',
      's = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=20); s.starttls(context=ssl._create_unverified_context())',
      's.login("plunk", sys.argv[2]); s.send_message(m); s.quit()',
    ].join('\n');
    await promisify(execFile)('python3', [
      '-c',
      script,
      String(relay.starttlsPort),
      scoped.body.data.key,
      `py@${p.domain}`,
      to2,
    ]);
    expect((await emailsTo(p.id, [to2]))[0]).toMatchObject({ subject: 'from python', status: 'queued' });
  });

  test('a message with a Message-ID submitted twice (the same bytes, as a client retrying) is accepted once', async () => {
    const to = recipient();
    const id = `<${randomBytes(8).toString('hex')}@${p.domain}>`;
    const raw = [
      `From: ann@${p.domain}`,
      `To: ${to}`,
      'Subject: twice',
      `Message-ID: ${id}`,
      'Date: Thu, 01 Jan 2026 00:00:00 +0000',
      '',
      'body',
      '',
    ].join('\r\n');
    const envelope = { from: `ann@${p.domain}`, to: [to] };
    const client = smtpClient(relay.starttlsPort, p.secretKey);
    const first = await client.sendMail({ envelope, raw });
    const second = await client.sendMail({ envelope, raw });
    expect(first.response).not.toContain('already accepted');
    expect(second.response).toContain('already accepted');
    expect(await emailsTo(p.id, [to])).toHaveLength(1);
    // The same Message-ID with other content is refused for good.
    await expect(client.sendMail({ envelope, raw: raw.replace('body', 'changed') })).rejects.toMatchObject({
      responseCode: 550,
    });
  });
});

describe('refusals', () => {
  test('AUTH before STARTTLS is refused; a wrong key 535; a public key 535; a revoked key 535; a disabled project 554', async () => {
    await expect(smtpClient(relay.starttlsPort, p.secretKey, { ignoreTLS: true }).verify()).rejects.toMatchObject({
      code: 'EAUTH',
    });
    await expect(
      smtpClient(relay.starttlsPort, `sk_${randomBytes(32).toString('base64url')}`).verify(),
    ).rejects.toMatchObject({ responseCode: 535 });
    await expect(smtpClient(relay.starttlsPort, p.publicKey).verify()).rejects.toMatchObject({ responseCode: 535 });

    const other = await createTestProject(api.database);
    const admin = (path: string, body: object = {}) =>
      request(api.app).post(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body);
    await admin(`/admin/projects/${other.id}/keys/revoke`, { key: other.secretKey });
    relay.authCache.clear();
    await expect(smtpClient(relay.starttlsPort, other.secretKey).verify()).rejects.toMatchObject({ responseCode: 535 });
    const third = await createTestProject(api.database);
    await admin(`/admin/projects/${third.id}/disable`);
    await expect(smtpClient(relay.starttlsPort, third.secretKey).verify()).rejects.toMatchObject({ responseCode: 554 });
  });

  test('a From on no verified domain: 550 naming the domain, nothing written; a restricted key on another domain: 550', async () => {
    const to = recipient();
    const err = await smtpClient(relay.starttlsPort, p.secretKey)
      .sendMail(message('ann@unverified.example.org', [to]))
      .catch((e: { responseCode: number; response: string }) => e);
    expect(err).toMatchObject({ responseCode: 550 });
    expect((err as { response: string }).response).toContain('unverified.example.org');
    expect(await emailsTo(p.id, [to])).toHaveLength(0);

    const scoped = await request(api.app)
      .post(`/admin/projects/${p.id}/keys`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ scope: 'sending', domains: [p.domain] });
    const err2 = await smtpClient(relay.starttlsPort, scoped.body.data.key)
      .sendMail(message('ann@elsewhere.example.org', [to]))
      .catch((e: { responseCode: number; response: string }) => e);
    expect(err2).toMatchObject({ responseCode: 550 });
    expect((err2 as { response: string }).response).toContain('elsewhere.example.org');
  });

  test("a second From address (another tenant's) or a second From line: 550 on from, nothing written", async () => {
    const to = recipient();
    const envelope = { from: `ann@${p.domain}`, to: [to] };
    const client = smtpClient(relay.starttlsPort, p.secretKey);
    for (const from of [
      `From: ann@${p.domain}, ceo@victim.example.org`,
      `From: ann@${p.domain}\r\nFrom: ceo@victim.example.org`,
    ]) {
      const raw = [from, `To: ${to}`, 'Subject: two senders', '', 'body', ''].join('\r\n');
      const err = await client.sendMail({ envelope, raw }).catch((e: { responseCode: number; response: string }) => e);
      expect(err).toMatchObject({ responseCode: 550 });
      expect((err as { response: string }).response).toContain('exactly one valid address');
    }
    expect(await emailsTo(p.id, [to])).toHaveLength(0);
  });

  test('over 10 MB: 552, the connection stays usable', async () => {
    const client = smtpClient(relay.starttlsPort, p.secretKey);
    const to = recipient();
    const big = Buffer.alloc(10 * 1024 * 1024 + 1024, 'a');
    const err = await client
      .sendMail(message(`ann@${p.domain}`, [to], { attachments: [{ filename: 'big.bin', content: big }] }))
      .catch((e: { responseCode: number }) => e);
    expect(err).toMatchObject({ responseCode: 552 });
    expect(await emailsTo(p.id, [to])).toHaveLength(0);
    expect((await client.sendMail(message(`ann@${p.domain}`, [to]))).response).toMatch(/^250 /);
  });

  test('more than 100 recipients: the 101st and later get 452; the first 100 are accepted', async () => {
    const to = Array.from({ length: 105 }, () => recipient('many'));
    const info = await smtpClient(relay.starttlsPort, p.secretKey).sendMail(message(`ann@${p.domain}`, to));
    expect(info.accepted).toHaveLength(100);
    expect(info.rejected).toHaveLength(5);
    expect(
      (info as unknown as { rejectedErrors: { responseCode: number }[] }).rejectedErrors.every(
        (e) => e.responseCode === 452,
      ),
    ).toBe(true);
    expect(await emailsTo(p.id, to)).toHaveLength(100);
  });

  test('a message resent to the recipients a 452 turned away (same Message-ID) is accepted for them', async () => {
    const to = Array.from({ length: 103 }, () => recipient('split'));
    const id = `<${randomBytes(8).toString('hex')}@${p.domain}>`;
    const raw = [
      `From: ann@${p.domain}`,
      `To: list@${p.domain}`,
      'Subject: split',
      `Message-ID: ${id}`,
      'Date: Thu, 01 Jan 2026 00:00:00 +0000',
      '',
      'body',
      '',
    ].join('\r\n');
    const client = smtpClient(relay.starttlsPort, p.secretKey);
    const first = await client.sendMail({ envelope: { from: `ann@${p.domain}`, to }, raw });
    expect(first.rejected).toHaveLength(3);
    const rest = await client.sendMail({ envelope: { from: `ann@${p.domain}`, to: first.rejected as string[] }, raw });
    expect(rest.accepted.sort()).toEqual([...(first.rejected as string[])].sort());
    expect(await emailsTo(p.id, to)).toHaveLength(103);
  });

  test('Postgres lost mid-session: 451 (never 250); once it is back the same message is accepted exactly once', async () => {
    const proxy = await cuttableProxy();
    const url = new URL(api.config.databaseUrl);
    url.host = `127.0.0.1:${proxy.port}`;
    const cut = await startTestRelay(api, api.config, url.toString());
    // One connection, kept open across the sends: the same SMTP session before, during and after the loss.
    const session = smtpClient(cut.starttlsPort, p.secretKey, { pool: true });
    try {
      const before = recipient('before');
      expect((await session.sendMail(message(`ann@${p.domain}`, [before]))).response).toMatch(/^250 /);
      const to = recipient('blip');
      const msg = message(`ann@${p.domain}`, [to], { messageId: `<${randomBytes(8).toString('hex')}@${p.domain}>` });
      proxy.cut();
      const refused = await session.sendMail(msg).catch((e: { responseCode: number; response: string }) => e);
      expect(refused).toMatchObject({ responseCode: 451 });
      expect(await emailsTo(p.id, [to])).toHaveLength(0);
      proxy.restore();
      expect((await session.sendMail(msg)).response).toMatch(/^250 /);
      expect(await emailsTo(p.id, [to])).toHaveLength(1);
    } finally {
      session.close();
      await cut.close();
      await proxy.close();
    }
  });
});

test('Redis lost mid-session: the message is accepted with its rows committed (the reconciler enqueues them)', async () => {
  const redisUrl = new URL(process.env.TEST_REDIS_URL!);
  const proxy = await cuttableProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
  const config = testConfig({
    ...(await smtpEnv()),
    REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
    QUEUE_PREFIX: api.config.queuePrefix,
  });
  const redis = createRedis(config, 'producer');
  await waitReady(redis);
  const queues = createQueues(config, redis);
  const cut = await startTestRelay(api, config, config.databaseUrl, { redis, queues });
  const session = smtpClient(cut.starttlsPort, p.secretKey, { pool: true });
  try {
    expect((await session.sendMail(message(`ann@${p.domain}`, [recipient('r-before')]))).response).toMatch(/^250 /);
    proxy.cut();
    const to = recipient('r-blip');
    const reply = await session.sendMail(message(`ann@${p.domain}`, [to])).then(
      (i) => i.response,
      (e: { response: string }) => e.response,
    );
    // Postgres holds the accepted message: 250, its row queued for the reconciler (the per-project limit falls back to
    // each process's memory while Redis is away, as on HTTP).
    expect(reply).toMatch(/^250 /);
    expect((await emailsTo(p.id, [to])).map((r) => r.status)).toEqual(['queued']);
  } finally {
    proxy.restore();
    session.close();
    await cut.close();
    await queues.closeAll();
    redis.disconnect();
    await proxy.close();
  }
});

describe('a relay with a failed-authentication limit of 3 per minute, and a local plain port', () => {
  let api2: TestApi;
  let relay2: TestRelay;
  let p2: TestProject;
  beforeAll(async () => {
    api2 = await startTestApi(
      testConfig(await smtpEnv({ AUTH_FAILURE_LIMIT_PER_MINUTE: '3', SMTP_ALLOW_INSECURE: 'true' })),
    );
    relay2 = await startTestRelay(api2);
    p2 = await createTestProject(api2.database);
  });
  afterAll(async () => {
    await relay2?.close();
    await api2?.close();
  });

  test('the local plain port takes AUTH without TLS when SMTP_ALLOW_INSECURE is set', async () => {
    const to = recipient();
    const info = await smtpClient(relay2.plainPort!, p2.secretKey, { ignoreTLS: true }).sendMail(
      message(`ann@${p2.domain}`, [to]),
    );
    expect(info.response).toMatch(/^250 /);
  });

  test('failed AUTHs and failed HTTP authentications of one address count toward one limit', async () => {
    const bogus = () => `sk_${randomBytes(32).toString('base64url')}`;
    for (let i = 0; i < 2; i++)
      expect((await request(api2.app).get('/templates').set('Authorization', `Bearer ${bogus()}`)).status).toBe(401);
    await expect(smtpClient(relay2.starttlsPort, bogus()).verify()).rejects.toMatchObject({ responseCode: 535 });
    // The third failure reached the limit: HTTP answers 429, SMTP a temporary authentication failure.
    expect((await request(api2.app).get('/templates').set('Authorization', `Bearer ${bogus()}`)).status).toBe(429);
    const blocked = await smtpClient(relay2.starttlsPort, bogus())
      .verify()
      .catch((e: { responseCode: number; response: string }) => e);
    expect(blocked).toMatchObject({ responseCode: 454 });
    expect((blocked as { response: string }).response).toMatch(/4\.7\.0 Too many failed authentications/);
  });
});
