/**
 * Inbound email: SES receipt notifications (a receipt rule's SNS action with the content inline, and its S3 action
 * against a local S3 stand-in serving recorded GetObject answers) arrive signed at `POST /webhooks/ses`; each
 * message is parsed, stored for the project of its inbound-enabled recipient domain, linked to its sender's contact
 * and to the email of ours it answers, announced by `email.received` (webhook, and the contact event that starts
 * workflows unless SES judged it spam or a virus), and read back through `GET /inbound…`. Hostile MIME is answered
 * 200 and kept as an error record.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import request from 'supertest';
import { retentionBatch } from '@mailroom/retention/queries/retention';
import {
  client,
  createTestProject,
  recipient,
  useApiWithProject,
  ADMIN_TOKEN,
  type TestProject,
} from '../support/harness';
import { startSnsHarness, type SnsHarness } from '../support/sns';

/** A stand-in for S3's GetObject (path-style): objects put by the test, `NoSuchKey` for the rest. */
async function startS3(): Promise<{
  endpoint: string;
  put(bucket: string, key: string, body: Buffer): void;
  close(): Promise<void>;
}> {
  const objects = new Map<string, Buffer>();
  const server = http.createServer((req, res) => {
    const found = req.method === 'GET' ? objects.get(decodeURIComponent((req.url ?? '').split('?')[0])) : undefined;
    if (found)
      return void res
        .writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': found.length })
        .end(found);
    res
      .writeHead(404, { 'content-type': 'application/xml' })
      .end(
        '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>',
      );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    put: (bucket, key, body) => objects.set(`/${bucket}/${key}`, body),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let sns: SnsHarness;
let s3: Awaited<ReturnType<typeof startS3>>;
let ctx: ReturnType<typeof useApiWithProject>;
{
  const env: Record<string, string> = {};
  beforeAll(async () => {
    sns = await startSnsHarness();
    s3 = await startS3();
    Object.assign(env, {
      SNS_TOPIC_ARNS: sns.topicArn,
      SNS_CERT_HOSTS: `sns.*.amazonaws.com,${sns.certHost}`,
      INBOUND_S3_ENDPOINT: s3.endpoint,
    });
  });
  ctx = useApiWithProject(env);
  afterAll(async () => {
    await sns.close();
    await s3.close();
  });
}

const post = (body: object) =>
  request(ctx.api.app)
    .post('/webhooks/ses')
    .set('Content-Type', 'text/plain; charset=UTF-8')
    .send(JSON.stringify(body));
const get = (p: TestProject, path: string) => request(ctx.api.app).get(path).set('Authorization', p.auth);

/** Enables inbound on the project's domain through the API. */
async function enableInbound(p: TestProject) {
  const list = await get(p, '/domains');
  const id = list.body.data.items.find((d: { domain: string }) => d.domain === p.domain).id as string;
  const res = await request(ctx.api.app)
    .put(`/domains/${id}/inbound`)
    .set('Authorization', p.auth)
    .send({ enabled: true });
  expect(res.status).toBe(200);
  return res;
}

type Verdicts = Partial<Record<'spam' | 'virus' | 'spf' | 'dkim' | 'dmarc', string>>;

/** An SES receipt notification (SNS action with inline content, or S3 action). */
function receipt(
  raw: string | Buffer,
  opts: { to: string[]; verdicts?: Verdicts; s3?: { bucket: string; key: string }; messageId?: string },
): object {
  const messageId = opts.messageId ?? `inb${randomBytes(12).toString('hex')}`;
  const v = { spam: 'PASS', virus: 'PASS', spf: 'PASS', dkim: 'PASS', dmarc: 'PASS', ...opts.verdicts };
  const status = (s: string) => ({ status: s });
  return {
    notificationType: 'Received',
    mail: {
      timestamp: new Date().toISOString(),
      source: 'sender@outside.test',
      messageId,
      destination: opts.to,
      headersTruncated: false,
      headers: [],
      commonHeaders: {},
    },
    receipt: {
      timestamp: new Date().toISOString(),
      processingTimeMillis: 300,
      recipients: opts.to,
      spamVerdict: status(v.spam),
      virusVerdict: status(v.virus),
      spfVerdict: status(v.spf),
      dkimVerdict: status(v.dkim),
      dmarcVerdict: status(v.dmarc),
      action: opts.s3
        ? { type: 'S3', topicArn: sns.topicArn, bucketName: opts.s3.bucket, objectKey: opts.s3.key }
        : { type: 'SNS', topicArn: sns.topicArn, encoding: 'BASE64' },
    },
    ...(opts.s3 ? {} : { content: Buffer.from(raw).toString('base64') }),
  };
}

/** A MIME message with a text part, an HTML part and one attachment. */
function mime(o: { from: string; to: string; subject: string; inReplyTo?: string; extraHeaders?: string[] }): string {
  return [
    `From: Ada <${o.from}>`,
    `To: ${o.to}`,
    `Subject: ${o.subject}`,
    `Message-ID: <${randomUUID()}@outside.test>`,
    ...(o.inReplyTo ? [`In-Reply-To: ${o.inReplyTo}`, `References: <older@outside.test> ${o.inReplyTo}`] : []),
    ...(o.extraHeaders ?? []),
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"',
    '',
    '--b1',
    'Content-Type: multipart/alternative; boundary="b2"',
    '',
    '--b2',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Hello there',
    '--b2',
    'Content-Type: text/html; charset=utf-8',
    '',
    '<p>Hello there</p>',
    '--b2--',
    '--b1',
    'Content-Type: text/csv; name="data.csv"',
    'Content-Disposition: attachment; filename="data.csv"',
    'Content-Transfer-Encoding: base64',
    '',
    Buffer.from('a,b\n1,2\n').toString('base64'),
    '--b1--',
    '',
  ].join('\r\n');
}

describe('happy path', () => {
  test('enabling inbound adds the MX record; an inline receipt is stored, parsed, linked to its contact, announced, and starts workflows', async () => {
    const { p } = ctx;
    const enabled = await enableInbound(p);
    expect(enabled.body.data.inboundEnabled).toBe(true);
    expect(enabled.body.data.records).toContainEqual(
      expect.objectContaining({
        purpose: 'inbound-mx',
        type: 'MX',
        name: p.domain,
        value: 'inbound-smtp.us-east-1.amazonaws.com',
        priority: 10,
      }),
    );

    const sender = recipient('ada');
    const contact = await client(ctx.api.app, p).post('/contacts', { email: sender });
    expect(contact.status).toBe(201);
    const hook = await client(ctx.api.app, p).post('/webhooks/endpoints', {
      url: 'https://hooks.example.com/in',
      eventTypes: ['email.received'],
    });
    expect(hook.status).toBe(201);

    const to = `support@${p.domain}`;
    const res = await post(sns.notification(receipt(mime({ from: sender, to, subject: 'Question' }), { to: [to] })));
    expect(res.status).toBe(200);
    expect(res.body.data.inbound).toEqual([{ projectId: p.id, id: expect.any(String), status: 'received' }]);
    const id = res.body.data.inbound[0].id as string;

    const got = await get(p, `/inbound/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({
      status: 'received',
      from: sender,
      fromName: 'Ada',
      to: [to],
      recipients: [to],
      subject: 'Question',
      text: 'Hello there',
      html: '<p>Hello there</p>',
      attachments: [{ filename: 'data.csv', contentType: 'text/csv', size: 8 }],
      verdicts: { spam: 'PASS', virus: 'PASS', spf: 'PASS', dkim: 'PASS', dmarc: 'PASS' },
      contactId: contact.body.data.id,
      inReplyToEmailId: null,
    });
    const raw = await get(p, `/inbound/${id}/raw`);
    expect(raw.status).toBe(200);
    expect(raw.headers['content-type']).toMatch(/^message\/rfc822/);
    const att = await get(p, `/inbound/${id}/attachments/0`);
    expect(att.status).toBe(200);
    expect(att.headers['content-type']).toMatch(/^text\/csv/);
    expect(att.headers['content-disposition']).toBe('attachment; filename="data.csv"');
    expect(att.text).toBe('a,b\n1,2\n');
    expect((await get(p, `/inbound/${id}/attachments/1`)).status).toBe(404);

    const events = await ctx.api.database.pool.query<{ name: string; data: { inboundId: string } }>(
      'select name, data from events where contact_id = $1',
      [contact.body.data.id],
    );
    expect(events.rows).toContainEqual(
      expect.objectContaining({ name: 'email.received', data: expect.objectContaining({ inboundId: id }) }),
    );
    const deliveries = await ctx.api.database.pool.query<{
      event_type: string;
      payload: { data: Record<string, unknown> };
    }>('select event_type, payload from webhook_deliveries where project_id = $1 and event_type = $2', [
      p.id,
      'email.received',
    ]);
    expect(deliveries.rows).toHaveLength(1);
    expect(deliveries.rows[0].payload.data).toMatchObject({
      inboundId: id,
      from: sender,
      subject: 'Question',
      text: 'Hello there',
      attachments: [{ filename: 'data.csv', size: 8 }],
    });
  });

  test('an SNS redelivery, or SES delivering the same message again, stores nothing new', async () => {
    const { p } = ctx;
    const to = `dup@${p.domain}`;
    const n = sns.notification(
      receipt(mime({ from: recipient(), to, subject: 'Once' }), {
        to: [to],
        messageId: `dup${randomBytes(8).toString('hex')}`,
      }),
    );
    expect((await post(n)).body.data.inbound).toHaveLength(1);
    expect((await post(n)).body.data).toMatchObject({ duplicate: true, inbound: [] });
    const again = sns.notification(JSON.parse((n as { Message: string }).Message) as object);
    expect((await post(again)).body.data.inbound).toEqual([]);
  });

  test('the S3 action: the message is fetched from S3; a missing object is an error record, answered 200', async () => {
    const { p } = ctx;
    const to = `big@${p.domain}`;
    const key = `inbound/${randomUUID()}`;
    s3.put('mail-bucket', key, Buffer.from(mime({ from: recipient(), to, subject: 'From S3' })));
    const res = await post(sns.notification(receipt('', { to: [to], s3: { bucket: 'mail-bucket', key } })));
    expect(res.status).toBe(200);
    const stored = await get(p, `/inbound/${res.body.data.inbound[0].id}`);
    expect(stored.body.data).toMatchObject({ status: 'received', subject: 'From S3', text: 'Hello there' });

    const gone = await post(
      sns.notification(receipt('', { to: [to], s3: { bucket: 'mail-bucket', key: 'inbound/missing' } })),
    );
    expect(gone.status).toBe(200);
    const failed = await get(p, `/inbound/${gone.body.data.inbound[0].id}`);
    expect(failed.body.data).toMatchObject({ status: 'failed', error: expect.stringContaining('NoSuchKey') });
    expect((await get(p, `/inbound/${gone.body.data.inbound[0].id}/raw`)).status).toBe(404);
  });

  test('a reply is linked to the email it answers (In-Reply-To names our Message-ID)', async () => {
    const { p } = ctx;
    const customer = recipient('cust');
    const sent = await client(ctx.api.app, p).post('/v1/send', {
      to: customer,
      from: `help@${p.domain}`,
      subject: 'Your ticket',
      body: '<p>Hi</p>',
    });
    const emailId = sent.body.data.emails[0].email as string;
    const to = `help@${p.domain}`;
    const res = await post(
      sns.notification(
        receipt(mime({ from: customer, to, subject: 'Re: Your ticket', inReplyTo: `<${emailId}@${p.domain}>` }), {
          to: [to],
        }),
      ),
    );
    const got = await get(p, `/inbound/${res.body.data.inbound[0].id}`);
    expect(got.body.data).toMatchObject({ inReplyToEmailId: emailId, contactId: sent.body.data.emails[0].contact.id });
  });

  test('GET /inbound pages by keyset, newest first', async () => {
    const p = await createTestProject(ctx.api.database);
    await enableInbound(p);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const to = `list@${p.domain}`;
      ids.push(
        (await post(sns.notification(receipt(mime({ from: recipient(), to, subject: `m${i}` }), { to: [to] })))).body
          .data.inbound[0].id,
      );
    }
    const first = await get(p, '/inbound?limit=2');
    expect(first.body.data).toMatchObject({ hasMore: true, total: 3 });
    expect(first.body.data.items.map((i: { id: string }) => i.id)).toEqual([ids[2], ids[1]]);
    const second = await get(p, `/inbound?limit=2&cursor=${encodeURIComponent(first.body.data.nextCursor)}`);
    expect(second.body.data).toMatchObject({ hasMore: false, nextCursor: null });
    expect(second.body.data.items.map((i: { id: string }) => i.id)).toEqual([ids[0]]);
  });
});

describe('verdicts and hostile input', () => {
  test('a virus (or spam) FAIL is stored and announced but starts no workflow', async () => {
    const { p } = ctx;
    const sender = recipient('virus');
    const contact = await client(ctx.api.app, p).post('/contacts', { email: sender });
    for (const verdicts of [{ virus: 'FAIL' }, { spam: 'FAIL' }]) {
      const to = `in@${p.domain}`;
      const res = await post(
        sns.notification(receipt(mime({ from: sender, to, subject: 'Infected' }), { to: [to], verdicts })),
      );
      expect(res.status).toBe(200);
      const got = await get(p, `/inbound/${res.body.data.inbound[0].id}`);
      expect(got.body.data).toMatchObject({
        status: 'received',
        verdicts: { ...{ spam: 'PASS', virus: 'PASS' }, ...verdicts },
        contactId: contact.body.data.id,
      });
    }
    const events = await ctx.api.database.pool.query('select 1 from events where contact_id = $1 and name = $2', [
      contact.body.data.id,
      'email.received',
    ]);
    expect(events.rowCount).toBe(0);
  });

  test('hostile MIME (deep nesting, a huge header block, bad encodings, NUL bytes) is answered 200 and stored, never a 5xx', async () => {
    const { p } = ctx;
    const to = `hostile@${p.domain}`;
    let nested = 'Content-Type: text/plain\r\n\r\ndeep\r\n';
    for (let i = 0; i < 60; i++)
      nested = `Content-Type: multipart/mixed; boundary="n${i}"\r\n\r\n--n${i}\r\n${nested}--n${i}--\r\n`;
    const deep = `From: a@outside.test\r\nTo: ${to}\r\nSubject: deep\r\nMIME-Version: 1.0\r\n${nested}`;
    const huge = `From: a@outside.test\r\nTo: ${to}\r\nX-Big: ${'x'.repeat(300 * 1024)}\r\nSubject: huge\r\n\r\nbody\r\n`;
    const badEncoding = [
      'From: =?x-unknown?B?!!!?= <a@outside.test>',
      `To: ${to}`,
      'Subject: =?utf-8?Q?broken=ZZ?= \u0000nul',
      'Content-Type: text/plain; charset="no-such-charset"',
      'Content-Transfer-Encoding: base64',
      '',
      '@@@ not base64 \u0000 ###',
      '',
    ].join('\r\n');
    const outcomes: Record<string, string> = {};
    for (const [name, raw] of Object.entries({ deep, huge, badEncoding })) {
      // A message over SNS's inline limit comes through the S3 action, as SES sends it.
      const key = `hostile/${randomUUID()}`;
      s3.put('mail-bucket', key, Buffer.from(raw));
      const res = await post(
        sns.notification(
          receipt(raw, { to: [to], ...(raw.length > 100_000 ? { s3: { bucket: 'mail-bucket', key } } : {}) }),
        ),
      );
      expect({ name, status: res.status, body: res.status === 200 ? undefined : res.body }).toEqual({
        name,
        status: 200,
        body: undefined,
      });
      const got = await get(p, `/inbound/${res.body.data.inbound[0].id}`);
      expect(got.status).toBe(200);
      outcomes[name] = got.body.data.status;
      if (got.body.data.status === 'failed') expect(got.body.data.error).toEqual(expect.any(String));
    }
    expect(outcomes).toMatchObject({ deep: 'failed', huge: 'failed' });
    expect(['received', 'failed']).toContain(outcomes.badEncoding);
  });
});

test('the OpenAPI document registers the inbound routes, the domain switch and the scoped-key route', async () => {
  const doc = (await request(ctx.api.app).get('/openapi.json')).body as {
    paths: Record<string, Record<string, { tags?: string[] }>>;
  };
  for (const [path, method] of [
    ['/inbound', 'get'],
    ['/inbound/{id}', 'get'],
    ['/inbound/{id}/raw', 'get'],
    ['/inbound/{id}/attachments/{n}', 'get'],
    ['/domains/{id}/inbound', 'put'],
    ['/admin/projects/{id}/keys', 'post'],
  ]) {
    expect(doc.paths[path]?.[method]).toBeDefined();
  }
  expect(doc.paths['/inbound'].get.tags).toEqual(['Inbound']);
});

describe('erasure', () => {
  test('deleting a contact deletes the mail they sent: linked to the contact, or from their address', async () => {
    const { p } = ctx;
    await enableInbound(p);
    const sender = recipient('erase');
    const contact = await client(ctx.api.app, p).post('/contacts', { email: sender });
    const to = `support@${p.domain}`;
    const linked = await post(sns.notification(receipt(mime({ from: sender, to, subject: 'linked' }), { to: [to] })));
    const ids = [linked.body.data.inbound[0].id as string];
    // One that arrived unlinked, from the address in another letter case.
    const unlinked = await post(
      sns.notification(receipt(mime({ from: sender.toUpperCase(), to, subject: 'unlinked' }), { to: [to] })),
    );
    ids.push(unlinked.body.data.inbound[0].id as string);
    const other = await post(
      sns.notification(receipt(mime({ from: recipient('other'), to, subject: 'other' }), { to: [to] })),
    );
    for (const id of ids) expect((await get(p, `/inbound/${id}`)).status).toBe(200);

    expect(
      (await request(ctx.api.app).delete(`/contacts/${contact.body.data.id}`).set('Authorization', p.auth)).status,
    ).toBe(200);
    for (const id of ids) {
      expect((await get(p, `/inbound/${id}`)).status).toBe(404);
      expect((await get(p, `/inbound/${id}/raw`)).status).toBe(404);
    }
    expect((await get(p, `/inbound/${other.body.data.inbound[0].id}`)).status).toBe(200);
  });
});

describe('retention', () => {
  test("received email older than the project's inboundDays is deleted with its raw message; newer stays", async () => {
    const p = await createTestProject(ctx.api.database);
    await enableInbound(p);
    const to = `old@${p.domain}`;
    const [old, fresh] = [
      (await post(sns.notification(receipt(mime({ from: recipient(), to, subject: 'old' }), { to: [to] })))).body.data
        .inbound[0].id as string,
      (await post(sns.notification(receipt(mime({ from: recipient(), to, subject: 'new' }), { to: [to] })))).body.data
        .inbound[0].id as string,
    ];
    await ctx.api.database.pool.query(
      `update inbound_emails set received_at = now() - interval '8 days' where id = $1`,
      [old],
    );
    const set = await request(ctx.api.app)
      .put(`/admin/projects/${p.id}/retention`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ inboundDays: 7 });
    expect(set.body.data.effective.inboundDays).toBe(7);
    expect(await retentionBatch(ctx.api.database.db, 'inbound', p.id, 7, 100)).toBe(1);
    expect((await get(p, `/inbound/${old}`)).status).toBe(404);
    expect((await get(p, `/inbound/${fresh}`)).status).toBe(200);
  });
});

describe('tenancy and errors', () => {
  test("another project's key sees nothing; a domain without inbound is ignored; a send-only key is refused", async () => {
    const { p } = ctx;
    const other = await createTestProject(ctx.api.database);
    const to = `iso@${p.domain}`;
    const res = await post(sns.notification(receipt(mime({ from: recipient(), to, subject: 'Mine' }), { to: [to] })));
    const id = res.body.data.inbound[0].id as string;
    for (const path of [`/inbound/${id}`, `/inbound/${id}/raw`, `/inbound/${id}/attachments/0`])
      expect((await get(other, path)).status).toBe(404);
    expect((await get(other, '/inbound')).body.data.items).toEqual([]);
    const otherDomain = (await get(other, '/domains')).body.data.items[0].id as string;
    expect(
      (
        await request(ctx.api.app)
          .put(`/domains/${otherDomain}/inbound`)
          .set('Authorization', p.auth)
          .send({ enabled: true })
      ).status,
    ).toBe(404);

    const ignored = await post(
      sns.notification(
        receipt(mime({ from: recipient(), to: `x@${other.domain}`, subject: 'Nobody' }), { to: [`x@${other.domain}`] }),
      ),
    );
    expect(ignored.status).toBe(200);
    expect(ignored.body.data).toMatchObject({ inbound: [], ignored: expect.stringContaining('inbound-enabled') });

    // An inbound-enabled domain that is not verified (still pending) receives nothing either.
    const pendingDomain = `p${randomBytes(5).toString('hex')}.example.com`;
    const added = await client(ctx.api.app, other).post('/domains', { domain: pendingDomain });
    expect(added.status).toBe(201);
    expect(
      (
        await request(ctx.api.app)
          .put(`/domains/${added.body.data.id}/inbound`)
          .set('Authorization', other.auth)
          .send({ enabled: true })
      ).status,
    ).toBe(200);
    const pending = await post(
      sns.notification(
        receipt(mime({ from: recipient(), to: `x@${pendingDomain}`, subject: 'Pending' }), {
          to: [`x@${pendingDomain}`],
        }),
      ),
    );
    expect(pending.body.data).toMatchObject({ inbound: [] });

    const scoped = await request(ctx.api.app)
      .post(`/admin/projects/${p.id}/keys`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ scope: 'sending' });
    const refused = await request(ctx.api.app).get('/inbound').set('Authorization', `Bearer ${scoped.body.data.key}`);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('KEY_SCOPE_FORBIDDEN');
    expect((await get(p, '/inbound/not-a-uuid')).status).toBe(400);
    expect((await get(p, `/inbound/${id}/attachments/x`)).status).toBe(400);
  });
});
