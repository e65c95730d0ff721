/**
 * `import plunk` against a database built from Plunk v2's schema (test/fixtures/plunk-v2-schema.sql, our own
 * transcription of its Prisma schema) filled with generated data (test/fixtures/plunk-v2-data.sql: 100k contacts
 * and every resource kind), imported into an isolated database through the CLI; and `project import-keys` (CLI
 * and `POST /admin/projects/{id}/keys/import`).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { Client } from 'pg';
import request from 'supertest';
import { plunkRowId } from '@mailroom/plunk-import/ids';
import { type PlunkImportReport } from '@mailroom/plunk-import/report';
import { runCli } from '../../apps/api/src/cli';
import { ADMIN_TOKEN, isolatedDatabase, startTestApi, testConfig, testEnv, type TestApi } from '../support/harness';

const FIXTURES = path.join(__dirname, '..', 'fixtures');
const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ACME = '11111111-1111-4111-8111-111111111111';
const LEGACY = '22222222-2222-4222-8222-222222222222';
const ACME_SECRET = 'sk_' + 'b2'.repeat(24);
const ACME_PUBLIC = 'pk_' + 'a1'.repeat(24);
const LEGACY_PUBLIC = 'pk_' + 'c3'.repeat(24);
const TABLES = [
  'projects',
  'api_keys',
  'domains',
  'contacts',
  'contact_stats_now',
  'templates',
  'segments',
  'segment_members',
  'campaigns',
  'emails',
  'workflows',
  'workflow_steps',
  'workflow_transitions',
  'events',
  'event_names_now',
  'workflow_inbox',
];

let sourceName: string;
let sourceUrl: string;
let target: { url: string; drop: () => Promise<void> };
let db: Client;
let first: PlunkImportReport;
let second: PlunkImportReport;
let firstProgress: string[];
let api: TestApi;
const acmeId = plunkRowId('project', ACME, '2024-01-01T10:00:00.123Z');
const legacyId = plunkRowId('project', LEGACY, '2024-01-02T00:00:00Z');

async function snapshot(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const t of TABLES) {
    const { rows } = await db.query(
      `SELECT count(*)::text || ':' || coalesce(md5(string_agg(x, '|' ORDER BY x)), '') AS h FROM (SELECT t::text AS x FROM ${t} t) s`,
    );
    out[t] = rows[0].h;
  }
  return out;
}

async function importPlunk(progress: string[]): Promise<PlunkImportReport> {
  return (await runCli(['import', 'plunk', '--database-url', sourceUrl], testEnv({ DATABASE_URL: target.url }), (l) =>
    progress.push(l),
  )) as PlunkImportReport;
}

beforeAll(async () => {
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  sourceName = `plunk_src_${Date.now()}_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE DATABASE "${sourceName}"`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${sourceName}`;
  sourceUrl = url.toString();
  const source = new Client({ connectionString: sourceUrl });
  await source.connect();
  const t0 = performance.now();
  await source.query(readFileSync(path.join(FIXTURES, 'plunk-v2-schema.sql'), 'utf8'));
  await source.query(readFileSync(path.join(FIXTURES, 'plunk-v2-data.sql'), 'utf8'));
  await source.end();
  console.log(`plunk-import: source database built in ${Math.round(performance.now() - t0)} ms`);

  target = await isolatedDatabase();
  db = new Client({ connectionString: target.url });
  await db.connect();

  firstProgress = [];
  const t1 = performance.now();
  first = await importPlunk(firstProgress);
  console.log(
    `plunk-import: first import (100,012 contacts, every kind) took ${Math.round(performance.now() - t1)} ms`,
  );
  const before = await snapshot();
  const t2 = performance.now();
  second = await importPlunk([]);
  console.log(`plunk-import: second import (nothing to write) took ${Math.round(performance.now() - t2)} ms`);
  const after = await snapshot();
  expect(after).toEqual(before);

  api = await startTestApi(testConfig({ DATABASE_URL: target.url }));
}, 180_000);

afterAll(async () => {
  await api?.close();
  await db?.end();
  await target?.drop();
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${sourceName}" WITH (FORCE)`);
  await admin.end();
});

describe('import plunk', () => {
  test('counts every kind, reports each refused row with its reason, and shows progress', () => {
    const tally = (imported: number, unmapped = 0) => ({ read: imported + unmapped, imported, skipped: 0, unmapped });
    expect(first.kinds).toEqual({
      projects: tally(2),
      keys: tally(3, 1),
      domains: tally(2, 1),
      contacts: tally(100_010, 2),
      templates: tally(3),
      segments: tally(2, 1),
      segmentMembers: tally(500),
      campaigns: tally(3, 1),
      campaignEmails: tally(500),
      workflows: tally(1, 1),
      steps: tally(7, 2),
      transitions: tally(8, 2),
      events: tally(20_000, 2),
    });
    const reasons = Object.fromEntries(first.unmapped.first.map((u) => [`${u.kind}:${u.plunkId}`, u.reason]));
    expect(first.unmapped.total).toBe(13);
    expect(reasons[`keys:${LEGACY}:secret`]).toMatch(/not a sk_ key/);
    expect(reasons['domains:dom-3']).toMatch(/not a domain name/);
    expect(reasons['contacts:contact-bad']).toMatch(/not an email address/);
    expect(reasons['contacts:contact-dup']).toMatch(/same address/);
    expect(reasons['segments:seg-bad']).toMatch(/field/);
    expect(reasons['campaigns:camp-bad']).toMatch(/segment seg-bad was not imported/);
    expect(reasons['workflows:wf-sched']).toMatch(/SCHEDULE triggers have no equivalent/);
    expect(reasons['steps:st-s-exit']).toMatch(/workflow wf-sched was not imported/);
    expect(reasons['transitions:tr-9']).toMatch(/same step on the same branch/);
    expect(reasons['events:event-orphan']).toMatch(/without a contact/);
    expect(reasons['events:event-dup']).toMatch(/contact contact-dup was not imported/);
    expect(first.notes.first).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/acme-mail\.example\.com was verified in Plunk: imported unverified/),
        expect.stringMatching(/workflow wf-main was enabled in Plunk: imported disabled/),
        expect.stringMatching(/campaign camp-sched was SCHEDULED in Plunk: imported as DRAFT/),
        expect.stringMatching(/template tpl-headless was HEADLESS/),
      ]),
    );
    expect(firstProgress).toContain('import plunk: contacts 100012/100012');
    expect(firstProgress.filter((l) => l.includes(' contacts ')).length).toBeGreaterThan(3);
  });

  test('a second run writes nothing: every row skipped, the same rows refused, every table unchanged (md5)', () => {
    for (const [kind, t] of Object.entries(first.kinds)) {
      expect({ kind, ...second.kinds[kind as keyof typeof first.kinds] }).toEqual({
        kind,
        read: t.read,
        imported: 0,
        skipped: t.imported,
        unmapped: t.unmapped,
      });
    }
    expect(second.unmapped.total).toBe(first.unmapped.total);
  });

  test('rows are mapped field by field', async () => {
    const q = async (text: string, params: unknown[] = []) => (await db.query(text, params)).rows;
    const [project] = await q('SELECT name, disabled FROM projects WHERE id = $1', [acmeId]);
    expect(project).toEqual({ name: 'Acme', disabled: false });
    expect(await q('SELECT count(*)::int AS n FROM contacts WHERE project_id = $1', [acmeId])).toEqual([
      { n: 100_000 },
    ]);

    // The fixture's contact ids are md5('contact' || i)::uuid.
    const plunkContact42 = createHash('md5')
      .update('contact42')
      .digest('hex')
      .replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-');
    const c42 = plunkRowId('contact', plunkContact42, '2024-01-01T00:00:42Z');
    const [contact] = await q(
      'SELECT email, email_key, subscribed, data, created_at, updated_at FROM contacts WHERE id = $1',
      [c42],
    );
    expect(contact).toEqual({
      email: 'user42@example.com',
      email_key: 'user42@example.com',
      subscribed: true,
      data: { plan: 'free', n: 42 },
      created_at: new Date('2024-01-01T00:00:42Z'),
      updated_at: new Date('2024-01-02T00:00:42Z'),
    });
    expect(
      await q('SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND NOT subscribed', [acmeId]),
    ).toEqual([{ n: 10_000 }]);
    const [legacy1] = await q(`SELECT data FROM contacts WHERE email = 'legacy1@example.org'`);
    expect(legacy1.data).toEqual({ value: [1, 2] });

    const [domain] = await q('SELECT project_id, status, verified, dkim_tokens FROM domains WHERE domain = $1', [
      'acme-mail.example.com',
    ]);
    expect(domain).toEqual({
      project_id: acmeId,
      status: 'pending',
      verified: false,
      dkim_tokens: ['tok1', 'tok2', 'tok3'],
    });

    const templates = await q(
      'SELECT name, type, subject, from_email, reply_to FROM templates WHERE project_id = $1 ORDER BY id',
      [acmeId],
    );
    expect(templates).toEqual([
      {
        name: 'Newsletter',
        type: 'MARKETING',
        subject: 'News for {{name ?? friend}}',
        from_email: 'news@acme-mail.example.com',
        reply_to: null,
      },
      {
        name: 'Receipt',
        type: 'TRANSACTIONAL',
        subject: 'Your receipt',
        from_email: 'billing@acme-mail.example.com',
        reply_to: 'help@acme-mail.example.com',
      },
      {
        name: 'Bare',
        type: 'TRANSACTIONAL',
        subject: 'Bare',
        from_email: 'bare@acme-mail.example.com',
        reply_to: null,
      },
    ]);

    const segments = await q(
      'SELECT name, type, filter, member_count FROM segments WHERE project_id = $1 ORDER BY id',
      [acmeId],
    );
    expect(segments).toEqual([
      {
        name: 'Pro plan',
        type: 'DYNAMIC',
        filter: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] },
        member_count: null,
      },
      { name: 'Beta testers', type: 'STATIC', filter: null, member_count: '500' },
    ]);

    const campaigns = await q(
      'SELECT name, status, audience_type, recipients, fanout_done, completed_at, unsubscribed FROM campaigns WHERE project_id = $1 ORDER BY id',
      [acmeId],
    );
    expect(campaigns).toEqual([
      {
        name: 'Spring draft',
        status: 'DRAFT',
        audience_type: 'ALL',
        recipients: '0',
        fanout_done: false,
        completed_at: null,
        unsubscribed: '0',
      },
      {
        name: 'Beta launch',
        status: 'SENT',
        audience_type: 'SEGMENT',
        recipients: '500',
        fanout_done: true,
        completed_at: new Date('2024-02-03T09:00:00Z'),
        unsubscribed: '7',
      },
      {
        name: 'Pro offer',
        status: 'DRAFT',
        audience_type: 'FILTERED',
        recipients: '0',
        fanout_done: false,
        completed_at: null,
        unsubscribed: '0',
      },
    ]);
    const history = await q(
      `SELECT status, count(*)::int AS n, sum(open_count)::int AS opens FROM emails WHERE source = 'campaign' GROUP BY status ORDER BY status`,
    );
    expect(history).toEqual([
      { status: 'bounced', n: 125, opens: 0 },
      { status: 'clicked', n: 125, opens: 250 },
      { status: 'delivered', n: 125, opens: 0 },
      { status: 'opened', n: 125, opens: 250 },
    ]);
    expect(await q(`SELECT count(*)::int AS n FROM emails WHERE status IN ('queued', 'sending')`)).toEqual([{ n: 0 }]);

    const [workflow] = await q(
      'SELECT id, name, trigger_type, trigger_event, enabled, allow_reentry FROM workflows WHERE project_id = $1',
      [acmeId],
    );
    expect(workflow).toMatchObject({
      name: 'Onboarding',
      trigger_type: 'EVENT',
      trigger_event: 'signup',
      enabled: false,
      allow_reentry: false,
    });
    const steps = Object.fromEntries(
      (await q('SELECT name, type, config FROM workflow_steps WHERE workflow_id = $1', [workflow.id])).map((s) => [
        s.name,
        s,
      ]),
    );
    expect(steps['Welcome']!.config).toEqual({ templateId: plunkRowId('template', 'tpl-tx', '2024-01-06T00:00:00Z') });
    expect(steps['Wait a day']!.config).toEqual({ amount: 1, unit: 'days' });
    expect(steps['Purchase?']!.config).toEqual({ event: 'purchase', timeout: { amount: 86_400, unit: 'seconds' } });
    expect(steps['Pro?']!.config).toEqual({ filter: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] });
    expect(steps['Mark VIP']!.config).toEqual({ data: { plan: 'vip' }, subscribed: true });
    expect(steps['Tell CRM']!.config).toEqual({
      url: 'https://crm.example.com/hook',
      method: 'POST',
      body: '{"event":"not-pro"}',
    });
    expect(steps['Done']!.config).toEqual({ reason: 'finished' });
    const edges = await q(
      `SELECT f.name AS "from", t.branch, s.name AS "to" FROM workflow_transitions t LEFT JOIN workflow_steps f ON f.id = t.from_step_id
       JOIN workflow_steps s ON s.id = t.to_step_id WHERE t.workflow_id = $1 ORDER BY t.id`,
      [workflow.id],
    );
    expect(edges).toEqual([
      { from: null, branch: 'next', to: 'Welcome' },
      { from: 'Welcome', branch: 'next', to: 'Wait a day' },
      { from: 'Wait a day', branch: 'next', to: 'Purchase?' },
      { from: 'Purchase?', branch: 'event', to: 'Pro?' },
      { from: 'Purchase?', branch: 'timeout', to: 'Done' },
      { from: 'Pro?', branch: 'yes', to: 'Mark VIP' },
      { from: 'Pro?', branch: 'no', to: 'Tell CRM' },
      { from: 'Mark VIP', branch: 'next', to: 'Done' },
    ]);

    expect(
      await q('SELECT name, count::int FROM event_names_now WHERE project_id = $1 ORDER BY name', [acmeId]),
    ).toEqual([
      { name: 'purchase', count: 10_000 },
      { name: 'signup', count: 10_000 },
    ]);
    // Imported history starts nothing: no workflow inbox rows, no executions.
    expect(
      await q(
        'SELECT (SELECT count(*) FROM workflow_inbox)::int AS inbox, (SELECT count(*) FROM workflow_executions)::int AS executions',
      ),
    ).toEqual([{ inbox: 0, executions: 0 }]);
  });

  test('history older than the existing partitions gets its own month partitions: nothing lands in a default partition', async () => {
    const months = async (table: string) =>
      (
        await db.query<{ m: string }>(
          `SELECT DISTINCT to_char(mailroom_uuid_v7_time(id) AT TIME ZONE 'UTC', 'YYYYMM') AS m FROM ${table} ORDER BY 1`,
        )
      ).rows.map((r) => r.m);
    const partitions = async (table: string) =>
      (
        await db.query<{ name: string }>(
          `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass`,
          [table],
        )
      ).rows.map((r) => r.name);
    for (const table of ['emails', 'events']) {
      const ms = await months(table);
      // The fixture's history is from 2024: months the migration did not make (it makes the last 24 and the next 3).
      expect(ms[0] <= '202403').toBe(true);
      const parts = await partitions(table);
      for (const m of ms)
        expect({ table, month: m, partition: parts.includes(`${table}_p${m}`) }).toEqual({
          table,
          month: m,
          partition: true,
        });
      const stray = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}_default`);
      expect({ table, inDefault: stray.rows[0].n }).toEqual({ table, inDefault: 0 });
    }
  });

  test('imported keys authenticate with their kind; a refused key does not', async () => {
    const list = await request(api.app).get('/contacts?limit=1').set('Authorization', `Bearer ${ACME_SECRET}`);
    expect(list.status).toBe(200);
    expect(list.body.data.total).toBe(100_000);
    const created = await request(api.app)
      .post('/contacts')
      .set('Authorization', `Bearer ${ACME_SECRET}`)
      .send({ email: 'newcomer@example.com' });
    expect(created.status).toBe(201);
    const pub = await request(api.app).get('/contacts').set('Authorization', `Bearer ${ACME_PUBLIC}`);
    expect(pub.status).toBe(403);
    expect(pub.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    const track = await request(api.app)
      .post('/v1/track')
      .set('Authorization', `Bearer ${LEGACY_PUBLIC}`)
      .send({ event: 'moved', email: 'legacy2@example.org' });
    expect(track.status).toBeLessThan(300);
    const legacy = await request(api.app).get('/contacts').set('Authorization', 'Bearer secret-from-an-old-install');
    expect(legacy.status).toBe(401);
  });
});

describe('project import-keys', () => {
  const admin = (p: string, body: object, token = ADMIN_TOKEN) =>
    request(api.app).post(p).set('Authorization', `Bearer ${token}`).send(body);
  const newSecret = 'sk_' + 'd4'.repeat(24);

  test('POST /admin/projects/{id}/keys/import stores the key hashed; it authenticates at once', async () => {
    const before = await request(api.app).get('/contacts?limit=1').set('Authorization', `Bearer ${newSecret}`);
    expect(before.status).toBe(401);
    const r = await admin(`/admin/projects/${legacyId}/keys/import`, { secretKey: newSecret });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({
      projectId: legacyId,
      keys: [{ kind: 'secret', keyPrefix: newSecret.slice(0, 10), active: true }],
    });
    expect(JSON.stringify(r.body)).not.toContain(newSecret);
    const [stored] = (await db.query('SELECT key_hash FROM api_keys WHERE key_prefix = $1', [newSecret.slice(0, 10)]))
      .rows;
    expect(stored.key_hash).toMatch(/^[0-9a-f]{64}$/);
    const after = await request(api.app).get('/contacts?limit=1').set('Authorization', `Bearer ${newSecret}`);
    expect(after.status).toBe(200);
    expect(after.body.data.total).toBe(10);
  });

  test('refuses a key already in use (409, nothing stored), malformed keys (422 naming the field), unknown projects (404), no admin token (401)', async () => {
    const again = await admin(`/admin/projects/${legacyId}/keys/import`, { secretKey: newSecret });
    expect(again.status).toBe(409);
    const plunkKey = await admin(`/admin/projects/${legacyId}/keys/import`, {
      secretKey: 'sk_' + 'e5'.repeat(24),
      publicKey: ACME_PUBLIC,
    });
    expect(plunkKey.status).toBe(409);
    expect(
      (
        await db.query(`SELECT count(*)::int AS n FROM api_keys WHERE key_prefix = $1`, [
          ('sk_' + 'e5'.repeat(24)).slice(0, 10),
        ])
      ).rows[0].n,
    ).toBe(0);
    const malformed = await admin(`/admin/projects/${legacyId}/keys/import`, {
      secretKey: 'sk_short',
      publicKey: ACME_SECRET,
    });
    expect(malformed.status).toBe(422);
    expect(malformed.body.error.errors.map((e: { field: string }) => e.field).sort()).toEqual([
      'publicKey',
      'secretKey',
    ]);
    const missing = await admin(`/admin/projects/${legacyId}/keys/import`, { publicKey: 'pk_' + 'f6'.repeat(24) });
    expect(missing.status).toBe(422);
    const unknown = await admin(`/admin/projects/00000000-0000-4000-8000-000000000000/keys/import`, {
      secretKey: 'sk_' + '07'.repeat(24),
    });
    expect(unknown.status).toBe(404);
    const noToken = await request(api.app)
      .post(`/admin/projects/${legacyId}/keys/import`)
      .send({ secretKey: 'sk_' + '08'.repeat(24) });
    expect(noToken.status).toBe(401);
  });

  test('the CLI imports a key pair, and refuses a key in use', async () => {
    const env = testEnv({ DATABASE_URL: target.url });
    const secretKey = 'sk_' + '19'.repeat(24);
    const publicKey = 'pk_' + '2a'.repeat(24);
    const r = (await runCli(
      ['project', 'import-keys', '--project', legacyId, '--secret-key', secretKey, '--public-key', publicKey],
      env,
    )) as {
      keys: { kind: string; keyPrefix: string }[];
    };
    expect(r.keys.map((k) => [k.kind, k.keyPrefix]).sort()).toEqual([
      ['public', publicKey.slice(0, 10)],
      ['secret', secretKey.slice(0, 10)],
    ]);
    const ok = await request(api.app).get('/contacts?limit=1').set('Authorization', `Bearer ${secretKey}`);
    expect(ok.status).toBe(200);
    await expect(
      runCli(['project', 'import-keys', '--project', legacyId, '--secret-key', secretKey], env),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(runCli(['project', 'import-keys', '--project', legacyId], env)).rejects.toThrow(
      /--secret-key is required/,
    );
  });
});
