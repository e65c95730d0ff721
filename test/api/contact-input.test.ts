/**
 * How contact input is read on every route that takes it:
 * - addresses: surrounding whitespace is not part of an address; it is accepted and trimmed once, at validation
 *   (contacts, `/v1/send` `to` / `from` / `reply`, `/v1/track`, `/v1/verify`, suppressions, segment filters on a
 *   literal address, import rows);
 * - contact data: an empty-string value is ignored (it never overwrites a stored value), `null` removes a key, on
 *   `POST /contacts`, `PATCH /contacts/{id}`, `/v1/send`, `/v1/track` and their batched writes, and imports.
 */
import { importRecord, parseImportFile, type ImportItem } from '@mailroom/contacts/imports';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (p: TestProject) => client(ctx.api.app, p);

/** `" Name.Tag@Inbox.TEST "`-style input for a fresh address, and the address as stored (domain lower-cased). */
function padded(tag: string) {
  const [local, domain] = recipient(tag).split('@');
  const mixed = `${local[0].toUpperCase()}${local.slice(1)}@${domain.toUpperCase()}`;
  return { input: `  ${mixed} \t`, stored: `${mixed.split('@')[0]}@${domain}` };
}

describe('surrounding whitespace around an address is accepted and trimmed', () => {
  test('POST /contacts: "  MixedCase@Example.COM " is the contact MixedCase@example.com (201, then the same contact)', async () => {
    const p = await createTestProject(ctx.api.database);
    const a = padded('Mixed');
    const created = await as(p).post('/contacts', { email: a.input, data: { plan: 'pro' } });
    expect(created.status).toBe(201);
    expect(created.body.data.email).toBe(a.stored);
    const again = await as(p).post('/contacts', { email: a.stored.toUpperCase() });
    expect(again.status).toBe(200);
    expect(again.body.data.id).toBe(created.body.data.id);
    // Inner whitespace still makes an address invalid.
    const inner = await as(p).post('/contacts', { email: 'ann smith@example.com' });
    expect(inner.status).toBe(422);
    expect(inner.body.error.errors[0].field).toBe('email');
  });

  test('/v1/send: to (string, mailbox and object forms), from and reply', async () => {
    const p = await createTestProject(ctx.api.database);
    const [a, b, c] = [padded('to1'), padded('to2'), padded('to3')];
    const res = await as(p).post('/v1/send', {
      to: [a.input, ` Bee <${b.stored}> `, { name: 'Cy', email: c.input }],
      from: `  news@${p.domain.toUpperCase()} `,
      reply: ` help@${p.domain} `,
      subject: 'S',
      body: 'B',
    });
    expect(res.status).toBe(202);
    expect(res.body.data.emails.map((e: { contact: { email: string } }) => e.contact.email)).toEqual([
      a.stored,
      b.stored,
      c.stored,
    ]);
    const email = (await as(p).get(`/emails/${res.body.data.emails[0].email}`)).body.data;
    expect(email).toMatchObject({ from: { email: `news@${p.domain}` }, replyTo: `help@${p.domain}` });
  });

  test('/v1/track, /v1/verify and the suppression list', async () => {
    const p = await createTestProject(ctx.api.database);
    const a = padded('trk');
    const tracked = await as(p).post('/v1/track', { email: a.input, event: 'signed-up' });
    expect(tracked.status).toBe(200);
    const contact = (await as(p).get(`/contacts/${tracked.body.data.contact}`)).body.data;
    expect(contact.email).toBe(a.stored);

    const verified = await as(p).post('/v1/verify', { email: '  someone@example.com ' });
    expect(verified.status).toBe(200);
    expect(verified.body.data.email).toBe('someone@example.com');

    const s = padded('sup');
    const added = await as(p).post('/suppressions', { emails: [s.input] });
    expect(added.status).toBe(201);
    expect(added.body.data.added[0].email).toBe(s.stored);
    const found = await as(p).get(`/suppressions/${encodeURIComponent(` ${s.stored} `)}`);
    expect(found.status).toBe(200);
    expect(found.body.data.email).toBe(s.stored);
  });

  test('segment filters: a literal address (equals, in) is trimmed; a substring (contains) is taken as given', async () => {
    const p = await createTestProject(ctx.api.database);
    const a = padded('seg');
    await as(p).post('/contacts', { email: a.stored });
    await as(p).post('/contacts', { email: recipient('other') });
    const members = async (filter: unknown) => {
      const res = await as(p).get(`/contacts?filter=${encodeURIComponent(JSON.stringify(filter))}`);
      expect(res.status).toBe(200);
      return res.body.data.items.map((c: { email: string }) => c.email);
    };
    expect(await members([{ field: 'email', operator: 'equals', value: a.input }])).toEqual([a.stored]);
    expect(await members([{ field: 'email', operator: 'in', value: [a.input] }])).toEqual([a.stored]);
    expect(await members([{ field: 'email', operator: 'contains', value: ` ${a.stored}` }])).toEqual([]);
    const segment = await as(p).post('/segments', {
      name: 'one',
      filter: [{ field: 'email', operator: 'equals', value: a.input }],
    });
    expect(segment.status).toBe(201);
    const listed = await as(p).get(`/segments/${segment.body.data.id}/contacts`);
    expect(listed.body.data.items.map((c: { email: string }) => c.email)).toEqual([a.stored]);
  });

  test('import rows (a JSON record and a CSV cell)', async () => {
    const item = importRecord(1, { email: ' Ann@Example.COM ', data: { plan: 'pro' } });
    expect(item.ok && item.record.email).toBe('Ann@example.com');
    expect(item.ok && item.record.emailKey).toBe('ann@example.com');
    const rows: ImportItem[] = [];
    const file = async function* () {
      yield Buffer.from('email,plan\n"  Bo@Example.COM ",pro\n');
    };
    for await (const row of parseImportFile('csv', file())) rows.push(row);
    expect(rows.map((r) => (r.ok ? r.record.email : r.error))).toEqual(['Bo@example.com']);
  });
});

describe('an empty-string value in contact data is ignored; null removes the key', () => {
  const stored = async (p: TestProject, id: string) =>
    (await as(p).get(`/contacts/${id}`)).body.data.data as Record<string, unknown>;

  test('POST /contacts and PATCH /contacts/{id}', async () => {
    const p = await createTestProject(ctx.api.database);
    const email = recipient('empty');
    const created = await as(p).post('/contacts', { email, data: { firstName: 'Ann', lastName: '', city: 'Oslo' } });
    expect(created.body.data.data).toEqual({ firstName: 'Ann', city: 'Oslo' });
    const upsert = await as(p).post('/contacts', { email, data: { firstName: '', city: null, plan: 'pro' } });
    expect(upsert.status).toBe(200);
    expect(upsert.body.data.data).toEqual({ firstName: 'Ann', plan: 'pro' });
    const patched = await as(p).patch(`/contacts/${created.body.data.id}`, {
      data: { firstName: '', plan: '', note: ' ' },
    });
    expect(patched.status).toBe(200);
    // Only the empty string is ignored: a space is a value.
    expect(patched.body.data.data).toEqual({ firstName: 'Ann', plan: 'pro', note: ' ' });
    // Nested values are stored as given.
    const nested = await as(p).patch(`/contacts/${created.body.data.id}`, { data: { address: { street: '' } } });
    expect(nested.body.data.data.address).toEqual({ street: '' });
  });

  test('/v1/send and /v1/track, alone and in concurrent (batched) requests', async () => {
    const p = await createTestProject(ctx.api.database);
    const emails = [recipient('e1'), recipient('e2'), recipient('e3'), recipient('e4')];
    const ids: string[] = [];
    for (const email of emails)
      ids.push((await as(p).post('/contacts', { email, data: { firstName: 'Ann', plan: 'pro' } })).body.data.id);
    const send = (to: string) =>
      as(p).post('/v1/send', {
        to,
        from: `n@${p.domain}`,
        subject: 'Hi {{firstName}}',
        body: 'b',
        data: { firstName: '', plan: null },
      });
    const track = (email: string) =>
      as(p).post('/v1/track', { email, event: 'seen', data: { firstName: '', plan: null } });
    // One alone of each, then several at once (the API folds concurrent writes into one statement).
    expect((await send(emails[0])).status).toBe(202);
    expect((await track(emails[1])).status).toBe(200);
    const concurrent = await Promise.all([send(emails[2]), track(emails[3]), send(emails[0]), track(emails[1])]);
    expect(concurrent.map((r) => r.status)).toEqual([202, 200, 202, 200]);
    for (const id of ids) expect(await stored(p, id)).toEqual({ firstName: 'Ann' });
  });

  test('import rows: an empty value neither sets nor removes', () => {
    const item = importRecord(1, { email: 'ann@example.com', data: { firstName: '', plan: null, city: 'Oslo' } });
    expect(item.ok && { set: item.record.set, removed: item.record.removed }).toEqual({
      set: { city: 'Oslo' },
      removed: ['plan'],
    });
  });
});
