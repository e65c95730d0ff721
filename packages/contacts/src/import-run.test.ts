/**
 * Storing an upload and running it, on the test database: chunks, head check, batches, row errors, and the resume
 * rule (records before `rowsProcessed` are not applied again).
 */
import { Readable } from 'node:stream';
import { eq, sql } from 'drizzle-orm';
import { AppError } from '@mailroom/platform/errors';
import { createLogger } from '@mailroom/platform/logger';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { findContactByEmail } from './queries/contacts';
import { contactImports } from '@mailroom/db/schema';
import { storeImport, type StoreImportDeps } from './import-upload';
import { runImport } from './import-run';
import { getImport, getImportErrors, importContactBatch, type ContactImportRow } from './queries/imports';
import { createTopic } from './queries/topics';
import { importRecord, type ImportRecord } from './imports';

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');
let database: Database;
let projectId: string;
let enqueued: ContactImportRow[];
let deps: StoreImportDeps;

beforeAll(async () => {
  database = createDatabase({
    url: process.env.TEST_DATABASE_URL!,
    poolSize: 2,
    applicationName: 'test-contacts-imports',
  });
  projectId = (await createProject(database.db, 'imports test')).id;
});
beforeEach(() => {
  enqueued = [];
  deps = { db: database.db, maxBytes: 1024, enqueue: (imp) => Promise.resolve(enqueued.push(imp)), log };
});
afterAll(() => database.close());

const upload = (text: string, mediaType = 'text/csv', filename: string | null = null) => ({
  stream: Readable.from([Buffer.from(text)]),
  filename,
  mediaType,
});
const tag = () => Math.random().toString(36).slice(2, 10);

test('a CSV is stored, queued, and applied in batches; a bad row is a row error', async () => {
  const t = tag();
  const csv = `email,subscribed,plan\na.${t}@example.com,,pro\nnot-an-address,yes,\nb.${t}@example.com,no,free\n`;
  const imp = await storeImport(deps, projectId, upload(csv), { subscribed: true });
  expect(imp).toMatchObject({ status: 'queued', format: 'csv', sizeBytes: Buffer.byteLength(csv), chunkCount: 1 });
  expect(enqueued.map((i) => i.id)).toEqual([imp.id]);

  const result = await runImport({ db: database.db, batchSize: 2 }, imp.id, { attempt: 1, attempts: 3 }, log);
  expect(result).toEqual({ outcome: 'completed', rows: 3, created: 2, updated: 0, skipped: 0, failed: 1 });
  expect(await findContactByEmail(database.db, projectId, `a.${t}@example.com`)).toMatchObject({
    subscribed: true,
    data: { plan: 'pro' },
  });
  expect(await findContactByEmail(database.db, projectId, `b.${t}@example.com`)).toMatchObject({
    subscribed: false,
    data: { plan: 'free' },
  });
  expect((await getImportErrors(database.db, projectId, imp.id)).map((e) => [e.row, e.email])).toEqual([
    [2, 'not-an-address'],
  ]);
  expect(await getImport(database.db, projectId, imp.id)).toMatchObject({
    status: 'completed',
    rowsProcessed: 3,
    bytesProcessed: Buffer.byteLength(csv),
  });

  // A finished import is not run again.
  expect(await runImport({ db: database.db, batchSize: 2 }, imp.id, { attempt: 1, attempts: 3 }, log)).toMatchObject({
    outcome: 'skipped',
  });
});

test('a resumed run skips the records already committed and keeps their counts', async () => {
  const t = tag();
  const ndjson = [`{"email":"c.${t}@example.com"}`, `{"email":"d.${t}@example.com","data":{"n":1}}`].join('\n');
  const imp = await storeImport(deps, projectId, upload(ndjson, 'application/octet-stream', 'people.ndjson'), {
    subscribed: false,
  });
  expect(imp.format).toBe('ndjson');
  // As if an earlier attempt committed the first record, then died.
  await database.db
    .update(contactImports)
    .set({ status: 'running', rowsProcessed: 1, created: 1 })
    .where(eq(contactImports.id, imp.id));
  const result = await runImport({ db: database.db, batchSize: 100 }, imp.id, { attempt: 2, attempts: 3 }, log);
  expect(result).toEqual({ outcome: 'completed', rows: 2, created: 2, updated: 0, skipped: 0, failed: 0 });
  expect(await findContactByEmail(database.db, projectId, `c.${t}@example.com`)).toBeUndefined();
  expect(await findContactByEmail(database.db, projectId, `d.${t}@example.com`)).toMatchObject({
    subscribed: false,
    data: { n: 1 },
  });
});

test('a refused upload stores nothing; an enqueue failure does not fail the upload', async () => {
  const status = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (err: AppError) => err.statusCode,
    );
  const count = async () =>
    (
      await database.db
        .select({ id: contactImports.id })
        .from(contactImports)
        .where(eq(contactImports.projectId, projectId))
    ).length;
  const before = await count();
  expect(await status(storeImport(deps, projectId, upload('name,plan\nx,y\n'), { subscribed: true }))).toBe(422);
  expect(await status(storeImport(deps, projectId, upload('email\n' + 'x'.repeat(2_000)), { subscribed: true }))).toBe(
    413,
  );
  expect(await status(storeImport(deps, projectId, upload('email\n', 'text/plain'), { subscribed: true }))).toBe(422);
  expect(enqueued).toEqual([]);
  expect(await count()).toBe(before);

  const down = { ...deps, enqueue: () => Promise.reject(new Error('Redis is down')) };
  const imp = await storeImport(down, projectId, upload(`email\ne.${tag()}@example.com\n`), { subscribed: true });
  expect(imp.status).toBe('queued');
  expect(await count()).toBe(before + 1);
  // Queued all the same: the reconciler's job would run it.
  expect(await runImport({ db: database.db, batchSize: 100 }, imp.id, { attempt: 1, attempts: 3 }, log)).toMatchObject({
    outcome: 'completed',
    created: 1,
  });
});

test('topic choices: an unknown topic column refuses the upload; a batch run again writes and records nothing twice; another project is untouched', async () => {
  const t = tag();
  const letter = await createTopic(database.db, projectId, { name: `Letter ${t}`, defaultSubscription: 'opt_in' });
  const other = (await createProject(database.db, 'imports test other')).id;
  const otherLetter = await createTopic(database.db, other, { name: `Letter ${t}`, defaultSubscription: 'opt_in' });
  const refused = await storeImport(deps, projectId, upload(`email,topic:Nope ${t}\na@x.test,yes\n`), {
    subscribed: true,
  }).catch((err: AppError) => err);
  expect(refused).toMatchObject({
    statusCode: 422,
    options: { errors: [{ field: 'file', message: expect.stringContaining(`"topic:Nope ${t}"`) }] },
  });

  const email = `t.${t}@example.com`;
  const rec = importRecord(1, { email }) as { ok: true; record: ImportRecord };
  const records = [{ ...rec.record, topics: { [`letter ${t}`]: true } }];
  const choices = () =>
    database.db.execute<{ project_id: string; subscribed: boolean; updated_at: Date }>(
      sql`select project_id, subscribed, updated_at from contact_topics where topic_id in (${letter.id}::uuid, ${otherLetter.id}::uuid)`,
    );
  const events = async () =>
    (await database.db.execute(sql`select 1 from events where data->>'topicId' in (${letter.id}, ${otherLetter.id})`))
      .rows.length;
  expect(await importContactBatch(database.db, projectId, records, true)).toEqual({
    created: 1,
    updated: 0,
    skipped: 0,
  });
  const first = (await choices()).rows;
  expect(first.map((r) => [r.project_id, r.subscribed])).toEqual([[projectId, true]]);
  expect(await events()).toBe(1);
  // The same batch again (a resumed import redoing it): nothing written, no second event.
  expect(await importContactBatch(database.db, projectId, records, true)).toEqual({
    created: 0,
    updated: 0,
    skipped: 1,
  });
  expect((await choices()).rows).toEqual(first);
  expect(await events()).toBe(1);
  // Rows of one address in a batch fold in file order: the last choice wins.
  const dup = [false, true, false].map((v, i) => ({ ...rec.record, row: i + 1, topics: { [`letter ${t}`]: v } }));
  expect(await importContactBatch(database.db, projectId, dup, true)).toEqual({ created: 0, updated: 3, skipped: 0 });
  expect((await choices()).rows.map((r) => r.subscribed)).toEqual([false]);
  expect(await events()).toBe(2);
});
