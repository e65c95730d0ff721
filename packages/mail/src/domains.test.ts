/**
 * The sending-domain flow on the test database, with the local identity provider over a stub resolver: register
 * (records to publish), check (pending until the DKIM CNAMEs resolve), and removal with its 409 rule. (The
 * refresher is left out: it takes every project's due domains of the shared database.)
 */
import { randomBytes } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import { AppError } from '@mailroom/platform/errors';
import { createLogger } from '@mailroom/platform/logger';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { getDomain } from './queries/domains';
import { campaigns } from '@mailroom/db/schema';
import { eq } from 'drizzle-orm';
import { LocalIdentityProvider } from './identities';
import { addDomain, checkDomain, removeDomain, type DomainDeps } from './domains';

/** A resolver that knows the CNAMEs published in `cnames` and nothing else. */
function stubResolver(cnames: Map<string, string>): Resolver {
  const missing = () => Promise.reject(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }));
  return {
    resolveCname: (name: string) => (cnames.has(name) ? Promise.resolve([cnames.get(name)!]) : missing()),
    resolveMx: missing,
    resolveTxt: missing,
  } as unknown as Resolver;
}

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');
let database: Database;
let deps: DomainDeps;
const published = new Map<string, string>();

beforeAll(() => {
  database = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 2, applicationName: 'test-mail-domains' });
  deps = {
    db: database.db,
    config: { mailFromSubdomain: 'mail', sesRegion: 'eu-west-1' },
    identities: new LocalIdentityProvider(stubResolver(published)),
  };
});
afterAll(() => database.close());

const statusOf = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (err: AppError) => err.statusCode,
  );

test('register, check, verify once the DKIM records resolve, and remove', async () => {
  const project = await createProject(database.db, 'domains test');
  const name = `D${randomBytes(5).toString('hex')}.Example.com`;
  const d = await addDomain(deps, project.id, name, log);
  expect(d.domain).toBe(name.toLowerCase());
  expect(d.mailFromDomain).toBe(`mail.${name.toLowerCase()}`);
  expect(d.status).toBe('pending');
  expect(d.records.map((r) => [r.purpose, r.type])).toEqual([
    ['dkim', 'CNAME'],
    ['dkim', 'CNAME'],
    ['dkim', 'CNAME'],
    ['mail-from-mx', 'MX'],
    ['mail-from-spf', 'TXT'],
    ['dmarc', 'TXT'],
  ]);
  expect(d.records.find((r) => r.type === 'MX')!.value).toBe('feedback-smtp.eu-west-1.amazonses.com');

  expect(await statusOf(addDomain(deps, project.id, name, log))).toBe(409);
  expect(await statusOf(addDomain(deps, project.id, 'not a domain', log))).toBe(422);

  const pending = await checkDomain(deps, project.id, d.id);
  expect(pending.status).toBe('pending');
  expect(pending.checkedAt).not.toBeNull();

  const dkim = d.records.filter((r) => r.purpose === 'dkim');
  for (const r of dkim.slice(0, 2)) published.set(r.name, r.value);
  expect((await checkDomain(deps, project.id, d.id)).status).toBe('pending');
  published.set(dkim[2].name, dkim[2].value);
  const verified = await checkDomain(deps, project.id, d.id);
  expect(verified.status).toBe('verified');
  expect(verified.verifiedAt).not.toBeNull();
  expect((await getDomain(database.db, project.id, d.id))!.status).toBe('verified');
  expect(verified.records.filter((r) => r.purpose === 'dkim').every((r) => r.status === 'found')).toBe(true);

  // A paused campaign sending from a subdomain holds the domain.
  const [campaign] = await database.db
    .insert(campaigns)
    .values({
      projectId: project.id,
      name: 'c',
      subject: 's',
      body: 'b',
      fromEmail: `news@eu.${d.domain}`,
      audienceType: 'ALL',
      status: 'PAUSED',
    })
    .returning();
  expect(await statusOf(removeDomain(deps, project.id, d.id))).toBe(409);
  await database.db.delete(campaigns).where(eq(campaigns.id, campaign.id));

  expect((await removeDomain(deps, project.id, d.id)).id).toBe(d.id);
  expect(await statusOf(removeDomain(deps, project.id, d.id))).toBe(404);
  expect(await statusOf(checkDomain(deps, project.id, d.id))).toBe(404);
});
