/**
 * Plunk v2's CONDITION steps on the fields every contact has (`contact.email`, `contact.subscribed`), with each of
 * Plunk's operators: accepted and converted to our filter language, and the converted filter selects the contacts
 * Plunk's condition would (checked by running it through `GET /contacts?filter=`). Ordering operators have no
 * meaning for an address and stay refused, naming the field.
 */
import { client, createTestProject, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (p: TestProject) => client(ctx.api.app, p);

/** A project with three contacts (two subscribed) and a workflow to add Plunk-form steps to. */
async function setup() {
  const p = await createTestProject(ctx.api.database);
  const tag = Math.random().toString(36).slice(2, 8);
  const people = { ann: `ann.${tag}@acme.test`, bob: `bob.${tag}@acme.test`, cy: `cy.${tag}@other.test` };
  await as(p).post('/contacts', { email: people.ann, subscribed: true });
  await as(p).post('/contacts', { email: people.bob, subscribed: true });
  await as(p).post('/contacts', { email: people.cy, subscribed: false });
  const wid = (await as(p).post('/workflows', { name: 'w', eventName: 'go' })).body.data.id as string;
  const condition = (config: object) =>
    as(p).post(`/workflows/${wid}/steps`, {
      type: 'CONDITION',
      name: 'c',
      position: { x: 0, y: 0 },
      autoConnect: false,
      config,
    });
  /** The contacts the step's converted filter selects. */
  const selects = async (config: object): Promise<string[]> => {
    const step = await condition(config);
    expect(step.status).toBe(201);
    const res = await as(p).get(
      `/contacts?limit=100&filter=${encodeURIComponent(JSON.stringify(step.body.data.config.filter))}`,
    );
    expect(res.status).toBe(200);
    return (res.body.data.items as { email: string }[]).map((c) => c.email).sort();
  };
  return { p, people, condition, selects, all: Object.values(people).sort() };
}

test('contact.email with notEquals and notContains: accepted and converted without an exists test', async () => {
  const { people, condition, selects } = await setup();
  const step = await condition({ field: 'contact.email', operator: 'notEquals', value: people.ann });
  expect(step.status).toBe(201);
  expect(step.body.data.config).toEqual({ filter: [{ field: 'email', operator: 'notEquals', value: people.ann }] });
  expect(await selects({ field: 'contact.email', operator: 'notEquals', value: people.ann.toUpperCase() })).toEqual(
    [people.bob, people.cy].sort(),
  );
  expect(await selects({ field: 'contact.email', operator: 'notContains', value: '@acme.test' })).toEqual([people.cy]);
});

test('every other Plunk operator on contact.email converts to what Plunk means', async () => {
  const { people, selects, all } = await setup();
  expect(await selects({ field: 'contact.email', operator: 'equals', value: people.bob })).toEqual([people.bob]);
  expect(await selects({ field: 'contact.email', operator: 'contains', value: 'acme' })).toEqual(
    [people.ann, people.bob].sort(),
  );
  // Every contact has an address: exists is always true, notExists always false.
  expect(await selects({ field: 'contact.email', operator: 'exists' })).toEqual(all);
  expect(await selects({ field: 'contact.email', operator: 'notExists' })).toEqual([]);
});

test('contact.subscribed: notEquals, exists and notExists as in Plunk', async () => {
  const { people, selects, all } = await setup();
  expect(await selects({ field: 'contact.subscribed', operator: 'notEquals', value: true })).toEqual([people.cy]);
  expect(await selects({ field: 'contact.subscribed', operator: 'exists' })).toEqual(all);
  expect(await selects({ field: 'contact.subscribed', operator: 'notExists' })).toEqual([]);
});

test("a data field keeps Plunk's rule that notEquals never matches a missing value", async () => {
  const { p, people, condition } = await setup();
  await as(p).post('/contacts', { email: people.ann, data: { plan: 'pro' } });
  await as(p).post('/contacts', { email: people.bob, data: { plan: 'free' } });
  const step = await condition({ field: 'data.plan', operator: 'notEquals', value: 'pro' });
  expect(step.body.data.config).toEqual({
    filter: [
      { field: 'data.plan', operator: 'exists' },
      { field: 'data.plan', operator: 'notEquals', value: 'pro' },
    ],
  });
  const res = await as(p).get(`/contacts?filter=${encodeURIComponent(JSON.stringify(step.body.data.config.filter))}`);
  expect(res.body.data.items.map((c: { email: string }) => c.email)).toEqual([people.bob]);
});

test('ordering operators have no meaning for an address: 422 naming config.operator', async () => {
  const { condition } = await setup();
  for (const operator of ['greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual']) {
    const res = await condition({ field: 'contact.email', operator, value: 'm' });
    expect(res.status).toBe(422);
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['config.operator']);
  }
});
