/**
 * What the worker composes from hostile data, end to end (API → worker → SES emulator, read back through the
 * recording proxy), on a database of its own:
 * - variables stay text in `/v1/send` Markdown and HTML bodies, campaigns and workflow emails: a link, a
 *   `javascript:` link, an image, an autolink or raw HTML in data is shown as written; a script or data URL from a
 *   variable never reaches an `href`/`src`;
 * - the headers of each kind of mail: one List-Unsubscribe pair at most, the caller's verbatim on transactional
 *   mail, the platform's and the bulk headers on marketing mail; platform-owned headers stored before the header
 *   rule are dropped at compose;
 * - `plunk_id` / `plunk_email` come from the contact, never from data;
 * - a message that cannot be composed fails at once (permanent), and its campaign still ends SENT.
 */
import request from 'supertest';
import { eq } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { newId } from '@mailroom/platform/ids';
import { sendJobOptions, SendPriority } from '@mailroom/queues/catalog';
import { createSendQueue } from '@mailroom/queues/create';
import { createTestProject, parseMail, recipient, sesSendsTo, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';
import type { RecordedSend } from '../support/ses-recorder';

const e2e = useE2e({
  isolated: true,
  env: { SES_MAX_SEND_RATE: '100', SEND_MAX_ATTEMPTS: '8', WORKFLOW_INBOX_POLL_MS: '200' },
});

const as = (p: TestProject) => ({
  post: (path: string, body: object) => request(e2e.api.app).post(path).set('Authorization', p.auth).send(body),
  put: (path: string, body: object) => request(e2e.api.app).put(path).set('Authorization', p.auth).send(body),
  patch: (path: string, body: object) => request(e2e.api.app).patch(path).set('Authorization', p.auth).send(body),
  get: (path: string) => request(e2e.api.app).get(path).set('Authorization', p.auth),
});

/** The one message SES accepted for `to`. */
async function delivered(to: string): Promise<RecordedSend> {
  const [send] = await waitFor(
    async () => {
      const s = await sesSendsTo([to]);
      return s.length > 0 && s;
    },
    20_000,
    `a message to ${to}`,
  );
  return send;
}

/** The header lines named `name` (any letter case) of a raw message's header block, unfolded (RFC 5322 §2.2.3). */
function headerLines(raw: string, name: string): string[] {
  const head = raw.slice(0, raw.indexOf('\r\n\r\n')).replace(/\r\n(?=[ \t])/g, '');
  return head.split('\r\n').filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
}

/** Data values that would be markup if rendered as Markdown or HTML. */
const VECTORS: Record<string, string> = {
  link: '[Verify your account](https://attacker.test/phish)',
  javascript: '[Verify](javascript:alert(1))',
  image: '![](https://tracker.test/pixel.gif)',
  autolink: '<https://attacker.test/auto> https://attacker.test/bare www.attacker.test',
  html: '<a href="https://attacker.test/raw">x</a><img src="https://tracker.test/raw.gif">',
};

/** Asserts that the vector `value` did not become markup in `html`, and shows as written in the text part. */
function expectInert(mail: { html?: string | false; text?: string }, value: string) {
  const html = mail.html as string;
  expect(html).not.toMatch(/<a\s[^>]*href="(https?:\/\/(www\.)?attacker|javascript:|data:)/i);
  expect(html).not.toMatch(/<img\s/i);
  expect(html).not.toMatch(/(href|src)="(javascript|data|vbscript):/i);
  const flat = (s: string) => s.replace(/\s+/g, ' ');
  expect(flat(mail.text ?? '')).toContain(flat(value));
}

describe('/v1/send', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(e2e.api.database);
  });

  test.each(['markdown', 'html'] as const)(
    '%s body: each vector in data stays text; a javascript: URL variable becomes #',
    async (type) => {
      const body =
        type === 'markdown' ? 'Hello {{name}}\n\n[Open]({{url}})' : '<p>Hello {{name}}</p><a href="{{url}}">Open</a>';
      const sent: [string, string][] = [];
      for (const value of Object.values(VECTORS)) {
        const to = recipient(type);
        const res = await as(p).post('/v1/send', {
          to,
          from: `a@${p.domain}`,
          subject: 'Hi {{name}}',
          body,
          type,
          data: { name: value, url: 'javascript:alert(document.cookie)' },
        });
        expect(res.status).toBe(202);
        sent.push([to, value]);
      }
      for (const [to, value] of sent) {
        const mail = await parseMail(await delivered(to));
        expectInert(mail, value);
        expect(mail.html).toMatch(/<a href="#">Open<\/a>/);
      }
    },
  );

  test('plunk_id and plunk_email come from the contact, whatever data says', async () => {
    const to = recipient('plunk');
    const res = await as(p).post('/v1/send', {
      to,
      from: `a@${p.domain}`,
      subject: '{{plunk_email}}',
      body: '<p>id={{plunk_id}} email={{plunk_email}}</p>',
      data: { plunk_id: 'forged', plunk_email: 'forged@attacker.test' },
    });
    expect(res.status).toBe(202);
    const contactId = res.body.data.emails[0].contact.id as string;
    const mail = await parseMail(await delivered(to));
    expect(mail.html).toContain(`<p>id=${contactId} email=${to}</p>`);
    expect(mail.subject).toBe(to);
  });

  test("transactional: the caller's List-Unsubscribe pair verbatim, once; without one, ours when the body links to the unsubscribe URL", async () => {
    const own = recipient('own');
    await as(p).post('/v1/send', {
      to: own,
      from: `a@${p.domain}`,
      subject: 's',
      body: '<a href="{{unsubscribeUrl}}">stop</a>',
      headers: {
        'list-unsubscribe': '<mailto:stop@x.test>',
        'list-unsubscribe-post': 'List-Unsubscribe=One-Click',
        'X-Campaign-Ref': 'r1',
      },
    });
    const ours = recipient('ours');
    await as(p).post('/v1/send', {
      to: ours,
      from: `a@${p.domain}`,
      subject: 's',
      body: '<a href="{{unsubscribeUrl}}">stop</a>',
    });
    const none = recipient('none');
    await as(p).post('/v1/send', { to: none, from: `a@${p.domain}`, subject: 's', body: '<p>receipt</p>' });

    const ownRaw = (await delivered(own)).raw;
    // Names are written in their canonical letter case by the MIME builder; the values are the caller's.
    expect(headerLines(ownRaw, 'List-Unsubscribe')).toEqual(['List-Unsubscribe: <mailto:stop@x.test>']);
    expect(headerLines(ownRaw, 'List-Unsubscribe-Post')).toEqual(['List-Unsubscribe-Post: List-Unsubscribe=One-Click']);
    expect(headerLines(ownRaw, 'X-Campaign-Ref')).toEqual(['X-Campaign-Ref: r1']);
    expect(headerLines(ownRaw, 'Precedence')).toEqual([]);
    const oursRaw = (await delivered(ours)).raw;
    expect(headerLines(oursRaw, 'List-Unsubscribe')).toHaveLength(1);
    expect(headerLines(oursRaw, 'List-Unsubscribe')[0]).toMatch(
      /^List-Unsubscribe: <http.*\/unsubscribe\/[A-Za-z0-9_-]{43}>$/,
    );
    expect(headerLines((await delivered(none)).raw, 'List-Unsubscribe')).toEqual([]);
  });

  test("marketing: the platform's pair and the bulk headers once each; a caller's bulk header replaces the default", async () => {
    const t = await as(p).post('/templates', {
      name: 'm',
      subject: 'News',
      body: '<p>News</p><a href="{{unsubscribeUrl}}">stop</a>',
      type: 'MARKETING',
      from: `n@${p.domain}`,
    });
    const to = recipient('mkt');
    const res = await as(p).post('/v1/send', {
      to,
      template: t.body.data.id,
      subscribed: true,
      headers: { precedence: 'list', 'X-Ref': '1' },
    });
    expect(res.status).toBe(202);
    const raw = (await delivered(to)).raw;
    expect(headerLines(raw, 'List-Unsubscribe')).toHaveLength(1);
    expect(headerLines(raw, 'List-Unsubscribe-Post')).toEqual(['List-Unsubscribe-Post: List-Unsubscribe=One-Click']);
    expect(headerLines(raw, 'Precedence')).toEqual(['Precedence: list']);
    expect(headerLines(raw, 'Auto-Submitted')).toEqual(['Auto-Submitted: auto-generated']);
    expect(headerLines(raw, 'X-Auto-Response-Suppress')).toEqual(['X-Auto-Response-Suppress: All']);
  });

  test('a row stored before the header rule: platform-owned and SES headers and a second List-Unsubscribe are dropped at compose', async () => {
    const to = recipient('legacy');
    const id = newId();
    await insertQueuedEmails(e2e.api.database.db, [
      {
        id,
        projectId: p.id,
        marketing: true,
        source: 'transactional',
        toEmail: to,
        fromEmail: `a@${p.domain}`,
        subject: 'old',
        body: '<p>old</p>',
        bodyFormat: 'html',
        headers: {
          'X-SES-CONFIGURATION-SET': 'attacker-set',
          'x-ses-source-arn': 'arn:aws:ses:x',
          'list-unsubscribe': '<https://attacker.test/u>',
          From: 'ceo@bank.test',
          'X-Keep': 'yes',
        },
      },
    ]);
    await createSendQueue(e2e.config, e2e.api.redis).add(
      'send',
      { emailId: id, projectId: p.id },
      sendJobOptions(e2e.config, id, SendPriority.transactional),
    );
    const raw = (await delivered(to)).raw;
    expect(raw).not.toMatch(/^x-ses-/im);
    expect(raw).not.toContain('attacker');
    expect(headerLines(raw, 'From')).toEqual([`From: a@${p.domain}`]);
    expect(headerLines(raw, 'List-Unsubscribe')).toHaveLength(1);
    expect(headerLines(raw, 'X-Keep')).toEqual(['X-Keep: yes']);
  });

  test('a message that cannot be composed (a raw value nested 20,000 deep) fails at once, permanently, with the reason', async () => {
    const to = recipient('deep');
    const res = await as(p).post('/v1/send', {
      to,
      from: `a@${p.domain}`,
      subject: 's',
      body: '<p>{{{block}}}</p>',
      data: { block: '<div>'.repeat(20_000) },
    });
    expect(res.status).toBe(202);
    const id = res.body.data.emails[0].email as string;
    const row = await waitFor(
      async () => {
        const [r] = await e2e.api.database.db.select().from(emails).where(eq(emails.id, id));
        return r?.status === 'failed' && r;
      },
      20_000,
      'the email failed',
    );
    expect(row).toMatchObject({ attempts: 1, failureKind: 'permanent' });
    expect(row.error).toMatch(/cannot compose the message: .*nests too deeply/);
    expect(await sesSendsTo([to])).toEqual([]);
  });
});

describe('campaigns', () => {
  test('contact data stays text and a javascript: link variable becomes #; marketing headers once each', async () => {
    const p = await createTestProject(e2e.api.database);
    const addresses: [string, string][] = [];
    for (const value of Object.values(VECTORS)) {
      const email = recipient('camp');
      addresses.push([email, value]);
      expect(
        (await as(p).post('/contacts', { email, subscribed: true, data: { name: value, link: 'javascript:alert(1)' } }))
          .status,
      ).toBe(201);
    }
    const c = await as(p).post('/campaigns', {
      name: 'c',
      subject: 'Hi',
      body: '<p>Hi {{name}}</p><a href="{{link}}">go</a><a href="{{unsubscribeUrl}}">stop</a>',
      from: `n@${p.domain}`,
      audienceType: 'ALL',
    });
    expect(c.status).toBe(201);
    expect((await as(p).post(`/campaigns/${c.body.data.id}/send`, {})).status).toBe(200);
    for (const [to, value] of addresses) {
      const send = await delivered(to);
      const mail = await parseMail(send);
      expectInert(mail, value);
      expect(mail.html).toContain('<a href="#">go</a>');
      expect(headerLines(send.raw, 'List-Unsubscribe')).toHaveLength(1);
      expect(headerLines(send.raw, 'Precedence')).toEqual(['Precedence: bulk']);
    }
  });

  test('a recipient whose message cannot be composed fails at once; the campaign ends SENT, not stuck SENDING', async () => {
    const p = await createTestProject(e2e.api.database);
    const ok = recipient('ok');
    const deep = recipient('deep');
    await as(p).post('/contacts', { email: ok, subscribed: true, data: { block: '<b>fine</b>' } });
    await as(p).post('/contacts', { email: deep, subscribed: true, data: { block: '<div>'.repeat(20_000) } });
    const c = await as(p).post('/campaigns', {
      name: 'c',
      subject: 'Hi',
      body: '<p>{{{block}}}</p><a href="{{unsubscribeUrl}}">stop</a>',
      from: `n@${p.domain}`,
      audienceType: 'ALL',
    });
    await as(p).post(`/campaigns/${c.body.data.id}/send`, {});
    await delivered(ok);
    const campaign = await waitFor(
      async () => {
        const res = await as(p).get(`/campaigns/${c.body.data.id}`);
        return res.body.data.status === 'SENT' && res.body.data;
      },
      30_000,
      'the campaign SENT',
    );
    expect(campaign.status).toBe('SENT');
    const [row] = await e2e.api.database.db.select().from(emails).where(eq(emails.toEmail, deep));
    expect(row).toMatchObject({ status: 'failed', attempts: 1, failureKind: 'permanent' });
  });
});

test('workflow SEND_EMAIL: contact and trigger data stay text; a javascript: URL from the trigger becomes #', async () => {
  const p = await createTestProject(e2e.api.database);
  const t = await as(p).post('/templates', {
    name: 't',
    subject: 'Hi',
    body: '<p>Hi {{name}} ({{trigger.note}})</p><a href="{{trigger.link}}">open</a>',
    from: `wf@${p.domain}`,
  });
  const w = await as(p).post('/workflows', { name: 'wf', trigger: { type: 'EVENT', event: 'signup' } });
  const wid = w.body.data.id as string;
  const graph = await as(p).put(`/workflows/${wid}/graph`, {
    steps: [{ key: 'send', type: 'SEND_EMAIL', config: { templateId: t.body.data.id } }],
    transitions: [{ from: null, to: 'send' }],
  });
  expect(graph.status).toBe(200);
  expect((await as(p).patch(`/workflows/${wid}`, { enabled: true })).status).toBe(200);
  const to = recipient('wf');
  // A public key may set contact data through /v1/track.
  const tracked = await request(e2e.api.app)
    .post('/v1/track')
    .set('Authorization', `Bearer ${p.publicKey}`)
    .send({
      email: to,
      event: 'signup',
      data: { name: VECTORS.link, note: VECTORS.html, link: 'javascript:alert(1)' },
    });
  expect(tracked.status).toBe(200);
  const mail = await parseMail(await delivered(to));
  expectInert(mail, VECTORS.link);
  expectInert(mail, VECTORS.html);
  expect(mail.html).toContain('<a href="#">open</a>');
});
