/**
 * Batched send writes (`@mailroom/sending/queries/transactional-batch`): a batch has exactly the effect of its
 * requests written one by one by `writeTransactional` (contacts, subscription events, emails, suppressed emails
 * and their timeline, `email.suppressed` webhook deliveries, a refused sender), across projects; a batch in which
 * two requests share a contact writes nothing.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { normalizeEmail, normalizedKey } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createDatabase, type Database } from '@mailroom/db/client';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { writeTransactional, type TransactionalContent } from './queries/transactional';
import {
  SharedContactInBatch,
  writeTransactionalBatch,
  type TransactionalRequest,
} from './queries/transactional-batch';

let database: Database;

beforeAll(() => {
  database = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 4, applicationName: 'test-send-batch' });
});
afterAll(() => database.close());

/** The project's verified domain (a domain belongs to one project). */
const goodDomain = (projectId: string) => `good-${projectId}.example`;

/** A project with a verified domain, a suppressed address and an endpoint taking `email.*`. */
async function project(tag: string) {
  const p = await createProject(database.db, `send batch ${randomUUID().slice(0, 6)}`);
  await addDomain(database.db, p.id, goodDomain(p.id), true);
  const blocked = normalizeEmail(`blocked.${tag}@example.com`);
  await database.db.execute(
    sql`insert into suppressions (id, project_id, email, email_key, reason) values (${newId()}, ${p.id}, ${blocked}, ${normalizedKey(blocked)}, 'manual')`,
  );
  await database.db.execute(
    sql`insert into webhook_endpoints (id, project_id, url, event_types, secret) values (${newId()}, ${p.id}, 'https://hooks.example/x', '{email.*}', 'whsec_x')`,
  );
  return p.id;
}

const content = (over: Partial<TransactionalContent> = {}): TransactionalContent => ({
  templateId: null,
  marketing: false,
  tracking: null,
  fromEmail: 'news@good.example',
  fromName: 'News',
  replyTo: null,
  subject: 'Hello {{name}}',
  body: '<p>Hi</p>',
  bodyFormat: 'html',
  variables: { name: 'Ann' },
  headers: {},
  attachmentIds: [],
  test: false,
  tags: null,
  ...over,
});

/** A request to `to` (each address one contact), as `acceptSend` builds it. */
function request(
  projectId: string,
  to: string[],
  opts: {
    subscribed?: boolean;
    data?: Record<string, unknown>;
    content?: Partial<TransactionalContent>;
    senders?: string[];
  } = {},
): TransactionalRequest {
  const recipients = to
    .map((email) => normalizeEmail(email))
    .map((email) => ({ id: newId(), email, emailKey: normalizedKey(email), name: null }));
  return {
    projectId,
    contacts: recipients.map((r) => ({
      email: r.email,
      subscribed: opts.subscribed,
      defaultSubscribed: false,
      data: opts.data,
    })),
    recipients,
    content: content(opts.content),
    webhookTimestamp: '2026-11-25T00:00:00.000Z',
    senderDomains: opts.senders,
  };
}

/** Everything a send writes in a project, without ids or times. */
async function state(projectId: string) {
  const q = async (query: ReturnType<typeof sql>) => (await database.db.execute(query)).rows;
  return {
    contacts: await q(
      sql`select email, subscribed, data from contacts where project_id = ${projectId} order by email_key`,
    ),
    events: await q(
      sql`select c.email, e.name, e.data, e.test from events e join contacts c on c.id = e.contact_id where e.project_id = ${projectId} order by c.email_key, e.name`,
    ),
    emails:
      await q(sql`select m.to_email, m.status, m.error, m.subject, m.body, m.from_email, m.from_name, m.variables, m.headers, m.test, m.marketing, m.source, c.email as contact
      from emails m join contacts c on c.id = m.contact_id where m.project_id = ${projectId} order by m.to_email, m.subject`),
    timeline: await q(
      sql`select m.to_email, t.type, t.data from email_events t join emails m on m.id = t.email_id where t.project_id = ${projectId} order by m.to_email, t.type`,
    ),
    webhooks:
      await q(sql`select event_type, payload->'data'->>'to' as to, payload->'data'->>'status' as status, payload->'data'->>'cause' as cause,
      payload->'data'->>'reason' as reason, payload->'data'->'test' as test, payload->>'timestamp' as ts
      from webhook_deliveries where project_id = ${projectId} order by payload->'data'->>'to'`),
  };
}

const scenario = (p: string, tag: string): TransactionalRequest[][] => [
  [
    request(p, [`ann.${tag}@example.com`], { data: { plan: 'pro' } }),
    request(p, [`bob.${tag}@example.com`, `blocked.${tag}@example.com`], {
      subscribed: true,
      content: { subject: 'Two' },
    }),
    request(p, [`cy.${tag}@example.com`], { senders: ['bad.example'] }),
    request(p, [`dee.${tag}@example.com`], {
      senders: ['other.example', goodDomain(p)],
      content: { test: true, subject: 'Test' },
    }),
  ],
  [
    request(p, [`ANN.${tag}@example.com`], { subscribed: false, data: { plan: null, seats: 3 } }),
    request(p, [`blocked.${tag}@example.com`], { content: { test: true, subject: 'Blocked test' } }),
    // Marketing: eve is created by this very send without `subscribed` (so unsubscribed: suppressed, cause
    // `unsubscribed`); bob subscribed in the first round (queued).
    request(p, [`eve.${tag}@example.com`], { content: { marketing: true, headers: { 'X-Tag': 'a' } } }),
    request(p, [`bob.${tag}@example.com`], { content: { marketing: true, subject: 'Deals' } }),
  ],
];

test('a batch has the effect of its requests written one by one', async () => {
  const tag = randomUUID().slice(0, 6);
  const [alone, batched] = [await project(tag), await project(tag)];
  const a = scenario(alone, tag);
  const b = scenario(batched, tag);
  for (let round = 0; round < a.length; round++) {
    const single = [];
    for (const r of a[round])
      single.push(
        await writeTransactional(
          database.db,
          r.projectId,
          r.contacts,
          r.recipients,
          r.content,
          r.webhookTimestamp,
          r.senderDomains,
        ),
      );
    const many = await writeTransactionalBatch(database.db, b[round]);
    expect(
      many.map((w) => ({
        refused: w.senderRefused,
        suppressed: [...w.suppressed],
        contacts: [...w.contacts.keys()].sort(),
        deliveries: w.deliveries.length,
      })),
    ).toEqual(
      single.map((w) => ({
        refused: w.senderRefused,
        suppressed: [...w.suppressed],
        contacts: [...w.contacts.keys()].sort(),
        deliveries: w.deliveries.length,
      })),
    );
  }
  const [sa, sb] = [await state(alone), await state(batched)];
  expect(sb).toEqual(sa);
  const suppressed = sa.emails.filter((e) => (e as { status: string }).status === 'suppressed') as {
    to_email: string;
    error: string;
  }[];
  expect(suppressed.map((e) => [e.to_email, e.error])).toEqual([
    [`blocked.${tag}@example.com`, 'suppressed: address is on the suppression list'],
    [`blocked.${tag}@example.com`, 'suppressed: address is on the suppression list'],
    [`eve.${tag}@example.com`, 'suppressed: contact is unsubscribed from marketing email'],
  ]);
  expect(
    sa.emails.filter(
      (e) => (e as { to_email: string; marketing: boolean; status: string }).to_email === `bob.${tag}@example.com`,
    ),
  ).toEqual(expect.arrayContaining([expect.objectContaining({ marketing: true, status: 'queued' })]));
  expect(sa.webhooks.map((w) => (w as { cause: string }).cause).sort()).toEqual([
    'suppression_list',
    'suppression_list',
    'unsubscribed',
  ]);
  expect(
    sa.timeline.filter((t) => (t as { type: string }).type === 'suppressed').map((t) => (t as { data: unknown }).data),
  ).toEqual(
    expect.arrayContaining([
      { reason: 'contact is unsubscribed from marketing email', cause: 'unsubscribed' },
      { reason: 'address is on the suppression list', cause: 'suppression_list' },
    ]),
  );
  expect(sa.contacts.map((c) => (c as { email: string }).email)).not.toContain(`cy.${tag}@example.com`);
});

test('requests of several projects share a batch; each gets its own write', async () => {
  const tag = randomUUID().slice(0, 6);
  const [p1, p2] = [await project(tag), await project(tag)];
  const to = `same.${tag}@example.com`;
  const [w1, w2] = await writeTransactionalBatch(database.db, [
    request(p1, [to], { data: { in: 1 } }),
    request(p2, [to, `blocked.${tag}@example.com`], { data: { in: 2 } }),
  ]);
  expect([...w1.contacts.values()][0].data).toEqual({ in: 1 });
  expect(w1.suppressed.size).toBe(0);
  expect(w2.suppressed).toEqual(
    new Map([[normalizedKey(normalizeEmail(`blocked.${tag}@example.com`)), 'suppression_list']]),
  );
  expect(w2.deliveries).toHaveLength(1);
  expect(w2.deliveries[0].projectId).toBe(p2);
  expect(w1.deliveries).toEqual([]);
  expect((await state(p1)).emails).toHaveLength(1);
  expect((await state(p2)).emails).toHaveLength(2);
});

test('two requests for one contact are refused as a batch before anything is written', async () => {
  const tag = randomUUID().slice(0, 6);
  const p = await project(tag);
  await expect(
    writeTransactionalBatch(database.db, [request(p, [`x.${tag}@example.com`]), request(p, [`X.${tag}@example.com`])]),
  ).rejects.toBeInstanceOf(SharedContactInBatch);
  const s = await state(p);
  expect(s.contacts).toEqual([]);
  expect(s.emails).toEqual([]);
});

test('files ride the statement: stored byte for byte with the emails that reference them, none for a refused sender', async () => {
  const tag = randomUUID().slice(0, 6);
  const p = await project(tag);
  const bytes = Buffer.from([0, 1, 2, 0xff, 0x5c, 0x22, 0x7b, 0x2c, 0x0d, 0x0a]);
  const withFile = (to: string, senders: string[]): TransactionalRequest => {
    const id = newId();
    const r = request(p, [to], { senders, content: { attachmentIds: [id], bodyFormat: 'mime' } });
    return { ...r, files: [{ id, filename: 'message.eml', contentType: 'message/rfc822', content: bytes }] };
  };
  const ok = withFile(`f1.${tag}@example.com`, [goodDomain(p)]);
  const refused = withFile(`f2.${tag}@example.com`, ['nobody-verified.example']);
  const out = await writeTransactionalBatch(database.db, [ok, refused]);
  expect(out.map((w) => w.senderRefused)).toEqual([false, true]);
  const files = (
    await database.db.execute(
      sql`select id, filename, content_type, size, content from attachments where project_id = ${p}`,
    )
  ).rows as {
    id: string;
    filename: string;
    content_type: string;
    size: number;
    content: Buffer;
  }[];
  expect(files).toHaveLength(1);
  expect(files[0]).toMatchObject({
    id: ok.content.attachmentIds[0],
    filename: 'message.eml',
    content_type: 'message/rfc822',
    size: bytes.length,
  });
  expect(Buffer.compare(files[0].content, bytes)).toBe(0);
  const emails = (await database.db.execute(sql`select to_email, attachment_ids from emails where project_id = ${p}`))
    .rows;
  expect(emails).toEqual([{ to_email: `f1.${tag}@example.com`, attachment_ids: ok.content.attachmentIds }]);
});
