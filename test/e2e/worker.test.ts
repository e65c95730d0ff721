/**
 * The send worker end to end: API → Postgres → Redis → worker → SES emulator (through the recording proxy).
 */
import request from 'supertest';
import { randomBytes, randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { sendJobOptions, SendPriority } from '@mailroom/queues/catalog';
import { createSendQueue } from '@mailroom/queues/create';
import { loadConfig, type Config } from '@mailroom/config/config';
import { claimEmail } from '@mailroom/sending/queries/email-batches';
import { emails } from '@mailroom/db/schema/emails';
import { setProjectDisabled } from '@mailroom/projects/queries/projects';
import { startWorker } from '../../apps/worker/src/main';
import {
  createTestProject,
  parseMail,
  recipient,
  sesFault,
  sesSendsTo,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';

async function emailRow(api: TestApi, id: string) {
  const [row] = await api.database.db.select().from(emails).where(eq(emails.id, id));
  return row;
}

async function waitStatus(api: TestApi, id: string, status: string, timeoutMs = 20_000) {
  return waitFor(
    async () => {
      const row = await emailRow(api, id);
      return row.status === status ? row : undefined;
    },
    timeoutMs,
    `email ${id} ${status}`,
  );
}

async function timeline(api: TestApi, p: TestProject, id: string): Promise<string[]> {
  const res = await request(api.app).get(`/emails/${id}`).set('Authorization', p.auth);
  return res.body.data.timeline.map((t: { type: string }) => t.type);
}

describe('with a running worker', () => {
  const e2e = useE2e({
    env: { SES_MAX_SEND_RATE: '100', SEND_MAX_ATTEMPTS: '2', SEND_BACKOFF_MS: '100' },
    project: true,
  });
  let config: Config;
  let api: TestApi;
  let p: TestProject;
  beforeAll(() => {
    ({ config, api, p } = e2e);
  });

  const send = (body: object) => request(api.app).post('/v1/send').set('Authorization', p.auth).send(body);

  test('a template renders escaped variables, raw variables, dotted paths and fallbacks; MIME carries both parts, attachments and headers', async () => {
    const tpl = await request(api.app)
      .post('/templates')
      .set('Authorization', p.auth)
      .send({
        name: 'welcome',
        subject: 'Welcome {{name ?? "friend"}} – café ☕',
        body: '<h1>Hi {{name ?? "friend"}}</h1><p>{{note}}</p><div>{{{banner}}}</div><p>{{user.city}}</p><p>{{missing}}|</p>',
        from: `team@${p.domain}`,
        fromName: 'Team Ünïcode',
        replyTo: `support@${p.domain}`,
      });
    expect(tpl.status).toBe(201);
    const bytes = randomBytes(200_000);
    const a = recipient('tpl');
    const b = recipient('tpl');
    const res = await send({
      to: [a, { name: 'Bo Ström', email: b }],
      template: tpl.body.data.id,
      data: { note: '<script>alert(1)</script> & co', banner: '<b>bold</b>', user: { city: 'Oslo' } },
      headers: { 'X-Campaign-Ref': 'ref-42', 'X-Unicode': 'naïve' },
      attachments: [
        { filename: 'data.bin', content: bytes.toString('base64'), contentType: 'application/octet-stream' },
        { filename: 'notes.txt', content: Buffer.from('hello').toString('base64') },
      ],
    });
    expect(res.status).toBe(202);
    expect(res.body.data.emails).toHaveLength(2);
    for (const e of res.body.data.emails) await waitStatus(api, e.email, 'sent');

    const sends = await sesSendsTo([a, b]);
    expect(sends).toHaveLength(2);
    for (const s of sends) expect(s.to).toHaveLength(1);
    const mail = await parseMail(sends.find((s) => s.to[0] === a)!);
    expect(mail.subject).toBe('Welcome friend – café ☕');
    expect(sends[0].raw).toMatch(/^Subject: =\?UTF-8\?[QB]\?/m);
    expect(mail.html).toContain('<h1>Hi friend</h1>');
    expect(mail.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; co');
    expect(mail.html).not.toContain('<script>');
    expect(mail.html).toContain('<div><b>bold</b></div>');
    expect(mail.html).toContain('<p>Oslo</p>');
    expect(mail.html).toContain('<p>|</p>');
    expect(mail.text).toContain('HI FRIEND');
    expect(mail.text).toContain('<script>alert(1)</script> & co');
    expect(mail.from?.value[0]).toEqual({ address: `team@${p.domain}`, name: 'Team Ünïcode' });
    expect(mail.replyTo?.value[0]?.address).toBe(`support@${p.domain}`);
    expect(mail.headers.get('x-campaign-ref')).toBe('ref-42');
    // RFC 2047 encoded-word for non-ASCII header text.
    expect(mail.headers.get('x-unicode')).toBe('=?UTF-8?Q?na=C3=AFve?=');
    expect(mail.attachments).toHaveLength(2);
    expect(Buffer.compare(mail.attachments[0].content, bytes)).toBe(0);
    expect(mail.attachments[0].filename).toBe('data.bin');
    expect(mail.attachments[1].content.toString()).toBe('hello');
    expect(mail.attachments[1].contentType).toBe('text/plain');
    const toB = await parseMail(sends.find((s) => s.to[0] === b)!);
    expect(toB.to && !Array.isArray(toB.to) ? toB.to.value[0] : undefined).toEqual({ address: b, name: 'Bo Ström' });

    const detail = await request(api.app).get(`/emails/${res.body.data.emails[0].email}`).set('Authorization', p.auth);
    expect(detail.body.data.subject).toBe('Welcome friend – café ☕');
    expect(detail.body.data.messageId).toEqual(expect.any(String));
    expect(detail.body.data.timeline.map((t: { type: string }) => t.type)).toEqual(['queued', 'sent']);
  });

  test('inline content with markdown, a sender name and the contact data as variables', async () => {
    const to = recipient('md');
    await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to, from: `a@${p.domain}`, subject: 's', body: 'b', data: { plan: 'pro' } });
    const res = await send({
      to,
      from: { name: 'Ann', email: `ann@${p.domain}` },
      subject: 'Plan {{plan}}',
      body: '# Title\n\n*{{who ?? world}}* on {{plan}}',
      type: 'markdown',
      data: { who: { value: 'Bob', persistent: false } },
    });
    expect(res.status).toBe(202);
    await waitStatus(api, res.body.data.emails[0].email, 'sent');
    const sends = await sesSendsTo([to]);
    const mail = await parseMail(sends.find((s) => s.raw.includes(res.body.data.emails[0].email))!);
    expect(mail.subject).toBe('Plan pro');
    expect(mail.html).toContain('<h1>Title</h1>');
    expect(mail.html).toContain('<em>Bob</em> on pro');
    expect(mail.from?.value[0]).toEqual({ address: `ann@${p.domain}`, name: 'Ann' });
  });

  test('SES throttling is retried later without spending an attempt', async () => {
    const to = recipient('throttle');
    await sesFault({
      match: to,
      status: 429,
      type: 'TooManyRequestsException',
      message: 'Maximum sending rate exceeded.',
      times: 3,
    });
    const res = await send({ to, from: `t@${p.domain}`, subject: 't', body: 't' });
    const id = res.body.data.emails[0].email;
    const row = await waitStatus(api, id, 'sent', 30_000);
    // Three throttled tries and one success, with SEND_MAX_ATTEMPTS=2: throttling spent none of them.
    expect(row.attempts).toBe(4);
    expect(await timeline(api, p, id)).toEqual(['queued', 'deferred', 'deferred', 'deferred', 'sent']);
    expect((await sesSendsTo([to])).length).toBe(1);
  });

  test('a transient SES error is retried with backoff', async () => {
    const to = recipient('transient');
    await sesFault({ match: to, status: 500, type: 'InternalFailure', message: 'internal', times: 1 });
    const res = await send({ to, from: `t@${p.domain}`, subject: 't', body: 't' });
    const id = res.body.data.emails[0].email;
    const row = await waitStatus(api, id, 'sent');
    expect(row.attempts).toBe(2);
    expect(await timeline(api, p, id)).toEqual(['queued', 'deferred', 'sent']);
  });

  test('transient errors past the attempt limit fail the email with the reason', async () => {
    const to = recipient('exhaust');
    await sesFault({ match: to, status: 503, type: 'ServiceUnavailable', message: 'down', times: 5 });
    const res = await send({ to, from: `t@${p.domain}`, subject: 't', body: 't' });
    const row = await waitStatus(api, res.body.data.emails[0].email, 'failed');
    expect(row.error).toMatch(/gave up after 2 attempts: ServiceUnavailable/);
    expect(row.attempts).toBe(2);
  });

  test('a permanent SES rejection fails the email at once', async () => {
    const to = recipient('reject');
    await sesFault({
      match: to,
      status: 400,
      type: 'MessageRejected',
      message: 'Email address is not verified.',
      times: 1,
    });
    const res = await send({ to, from: `t@${p.domain}`, subject: 't', body: 't' });
    const id = res.body.data.emails[0].email;
    const row = await waitStatus(api, id, 'failed');
    expect(row.error).toBe('MessageRejected: Email address is not verified.');
    expect(row.attempts).toBe(1);
    const detail = await request(api.app).get(`/emails/${id}`).set('Authorization', p.auth);
    expect(detail.body.data).toMatchObject({
      status: 'failed',
      error: 'MessageRejected: Email address is not verified.',
    });
    expect(detail.body.data.timeline.map((t: { type: string }) => t.type)).toEqual(['queued', 'failed']);
  });

  test('a job for an email that is already sent does not send it again', async () => {
    const to = recipient('dup');
    const res = await send({ to, from: `t@${p.domain}`, subject: 't', body: 't' });
    const id = res.body.data.emails[0].email;
    await waitStatus(api, id, 'sent');
    const queue = createSendQueue(config, api.redis);
    const again = await queue.add(
      'send',
      { emailId: id, projectId: p.id },
      { ...sendJobOptions(config, `${id}-retry`, SendPriority.transactional) },
    );
    await waitFor(
      async () => ((await again.getState()) === 'completed' ? true : undefined),
      10_000,
      'duplicate job done',
    );
    expect((await queue.getJob(again.id!))!.returnvalue).toEqual({ outcome: 'skipped', reason: 'already sent' });
    await queue.close();
    expect((await sesSendsTo([to])).length).toBe(1);
  });
});

describe('without a running worker at acceptance', () => {
  test('an email claimed by a worker that died is sent once, after its lease expires', async () => {
    const config = loadConfig(testEnv({ SEND_LEASE_MS: '1500', SES_MAX_SEND_RATE: '100' }));
    const api = await startTestApi(config);
    const p = await createTestProject(api.database);
    const to = recipient('lease');
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to, from: `l@${p.domain}`, subject: 'l', body: 'l' });
    const id = res.body.data.emails[0].email;
    // A worker claims the row and dies before calling SES.
    const dead = await claimEmail(api.database.db, id, randomUUID(), config.sendLeaseMs);
    expect(dead.ok).toBe(true);
    const claimedAt = Date.now();
    const worker = await startWorker(config, { healthPort: null });
    try {
      const row = await waitStatus(api, id, 'sent', 15_000);
      expect(row.sentAt!.getTime()).toBeGreaterThanOrEqual(claimedAt + 1500 - 50);
      expect(row.attempts).toBe(2);
    } finally {
      await worker.stop();
      await api.close();
    }
    expect((await sesSendsTo([to])).length).toBe(1);
  });

  test('mail of a project disabled after acceptance is cancelled, not sent', async () => {
    const config = loadConfig(testEnv({ SES_MAX_SEND_RATE: '100' }));
    const api = await startTestApi(config);
    const p = await createTestProject(api.database);
    const to = recipient('disabled');
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to, from: `d@${p.domain}`, subject: 'd', body: 'd' });
    expect(res.status).toBe(202);
    await setProjectDisabled(api.database.db, p.id, true);
    const worker = await startWorker(config, { healthPort: null });
    try {
      const row = await waitStatus(api, res.body.data.emails[0].email, 'cancelled');
      expect(row.error).toBe('project disabled');
    } finally {
      await worker.stop();
      await api.close();
    }
    expect(await sesSendsTo([to])).toHaveLength(0);
  });
});
