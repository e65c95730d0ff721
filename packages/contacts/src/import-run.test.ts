/**
 * Storing an upload and running it, on the test database: chunks, head check, batches, row errors, and the resume
 * rule (records before `rowsProcessed` are not applied again).
 */
import { Readable } from 'node:stream';
import { eq } from 'drizzle-orm';
import { AppError } from '@mailroom/platform/errors';
import { createLogger } from '@mailroom/platform/logger';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/db/queries/projects';
import { findContactByEmail } from '@mailroom/db/queries/contacts';
import { contactImports } from '@mailroom/db/schema';
import { storeImport, type StoreImportDeps } from './import-upload';
import { runImport } from './import-run';
import { getImport, getImportErrors, type ContactImportRow } from './queries/imports';

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');
let database: Database;
let projectId: string;
let enqueued: ContactImportRow[];
let deps: StoreImportDeps;

beforeAll(async () => {
  database = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 2, applicationName: 'test-contacts-imports' });
  projectId = (await createProject(database.db, 'imports test')).id;
});
beforeEach(() => {
  enqueued = [];
  deps = { db: database.db, maxBytes: 1024, enqueue: (imp) => Promise.resolve(enqueued.push(imp)), log };
});
afterAll(() => database.close());

const upload = (text: string, mediaType = 'text/csv', filename: string | null = null) => ({ stream: Readable.from([Buffer.from(text)]), filename, mediaType });
const tag = () => Math.random().toString(36).slice(2, 10);

test('a CSV is stored, queued, and applied in batches; a bad row is a row error', async () => {
  const t = tag();
  const csv = `email,subscribed,plan\na.${t}@example.com,,pro\nnot-an-address,yes,\nb.${t}@example.com,no,free\n`;
  const imp = await storeImport(deps, projectId, upload(csv), { subscribed: true });
  expect(imp).toMatchObject({ status: 'queued', format: 'csv', sizeBytes: Buffer.byteLength(csv), chunkCount: 1 });
  expect(enqueued.map((i) => i.id)).toEqual([imp.id]);

  const result = await runImport({ db: database.db, batchSize: 2 }, imp.id, { attempt: 1, attempts: 3 }, log);
  expect(result).toEqual({ outcome: 'completed', rows: 3, created: 2, updated: 0, skipped: 0, failed: 1 });
  expect(await findContactByEmail(database.db, projectId, `a.${t}@example.com`)).toMatchObject({ subscribed: true, data: { plan: 'pro' } });
  expect(await findContactByEmail(database.db, projectId, `b.${t}@example.com`)).toMatchObject({ subscribed: false, data: { plan: 'free' } });
  expect((await getImportErrors(database.db, projectId, imp.id)).map((e) => [e.row, e.email])).toEqual([[2, 'not-an-address']]);
  expect(await getImport(database.db, projectId, imp.id)).toMatchObject({ status: 'completed', rowsProcessed: 3, bytesProcessed: Buffer.byteLength(csv) });

  // A finished import is not run again.
  expect(await runImport({ db: database.db, batchSize: 2 }, imp.id, { attempt: 1, attempts: 3 }, log)).toMatchObject({ outcome: 'skipped' });
});

test('a resumed run skips the records already committed and keeps their counts', async () => {
  const t = tag();
  const ndjson = [`{"email":"c.${t}@example.com"}`, `{"email":"d.${t}@example.com","data":{"n":1}}`].join('\n');
  const imp = await storeImport(deps, projectId, upload(ndjson, 'application/octet-stream', 'people.ndjson'), { subscribed: false });
  expect(imp.format).toBe('ndjson');
  // As if an earlier attempt committed the first record, then died.
  await database.db.update(contactImports).set({ status: 'running', rowsProcessed: 1, created: 1 }).where(eq(contactImports.id, imp.id));
  const result = await runImport({ db: database.db, batchSize: 100 }, imp.id, { attempt: 2, attempts: 3 }, log);
  expect(result).toEqual({ outcome: 'completed', rows: 2, created: 2, updated: 0, skipped: 0, failed: 0 });
  expect(await findContactByEmail(database.db, projectId, `c.${t}@example.com`)).toBeUndefined();
  expect(await findContactByEmail(database.db, projectId, `d.${t}@example.com`)).toMatchObject({ subscribed: false, data: { n: 1 } });
});

test('a refused upload stores nothing; an enqueue failure does not fail the upload', async () => {
  const status = (p: Promise<unknown>) => p.then(() => 'ok', (err: AppError) => err.statusCode);
  const count = async () => (await database.db.select({ id: contactImports.id }).from(contactImports).where(eq(contactImports.projectId, projectId))).length;
  const before = await count();
  expect(await status(storeImport(deps, projectId, upload('name,plan\nx,y\n'), { subscribed: true }))).toBe(422);
  expect(await status(storeImport(deps, projectId, upload('email\n' + 'x'.repeat(2_000)), { subscribed: true }))).toBe(413);
  expect(await status(storeImport(deps, projectId, upload('email\n', 'text/plain'), { subscribed: true }))).toBe(422);
  expect(enqueued).toEqual([]);
  expect(await count()).toBe(before);

  const down = { ...deps, enqueue: () => Promise.reject(new Error('Redis is down')) };
  const imp = await storeImport(down, projectId, upload(`email\ne.${tag()}@example.com\n`), { subscribed: true });
  expect(imp.status).toBe('queued');
  expect(await count()).toBe(before + 1);
  // Queued all the same: the reconciler's job would run it.
  expect(await runImport({ db: database.db, batchSize: 100 }, imp.id, { attempt: 1, attempts: 3 }, log)).toMatchObject({ outcome: 'completed', created: 1 });
});
