/**
 * The typed client (`@mailroom/client`) against a running API: one representative operation of every resource,
 * the error bodies it types (422 with errors[], 404, 401, 403 for a public key), idempotency keys and the
 * pagination iterator.
 */
import { createMailroomClient, type MailroomClient } from '@mailroom/client/client';
import { MailroomError, unwrap } from '@mailroom/client/errors';
import { paginate } from '@mailroom/client/pagination';
import { withIdempotencyKey } from '@mailroom/client/idempotency';
import { recipient } from '../support/harness';
import { serveApi, type ServedApi } from './support';

let served: ServedApi;
let mailroom: MailroomClient;
const requests: string[] = [];

beforeAll(async () => {
  served = await serveApi();
  mailroom = createMailroomClient({
    apiKey: served.project.secretKey,
    baseUrl: served.baseUrl,
    fetch: (request) => {
      requests.push(`${request.method} ${new URL(request.url).pathname}${new URL(request.url).search}`);
      return fetch(request);
    },
  });
});
afterAll(async () => {
  await served?.close();
});

/** The MailroomError a call throws through `unwrap`. */
async function failure(call: Promise<Parameters<typeof unwrap>[0]>): Promise<MailroomError> {
  try {
    unwrap(await call);
  } catch (err) {
    if (err instanceof MailroomError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

test('send (with an idempotency key, replayed) and read the email back, alone and in the list', async () => {
  const to = recipient('client');
  const header = withIdempotencyKey();
  const body = {
    to,
    subject: 'Hello {{name}}',
    body: '<p>Hi {{name}}</p>',
    from: `app@${served.project.domain}`,
    data: { name: 'Ada' },
  };
  const first = await mailroom.POST('/v1/send', { params: { header }, body });
  expect(first.response.status).toBe(202);
  const sent = unwrap(first);
  expect(sent.emails).toHaveLength(1);
  expect(sent.emails[0].contact.email).toBe(to);

  const again = await mailroom.POST('/v1/send', { params: { header }, body });
  expect(again.response.headers.get('Idempotent-Replayed')).toBe('true');
  expect(unwrap(again).emails[0].email).toBe(sent.emails[0].email);

  const email = unwrap(await mailroom.GET('/emails/{id}', { params: { path: { id: sent.emails[0].email } } }));
  expect(email).toMatchObject({ id: sent.emails[0].email, status: 'queued', timeline: [{ type: 'queued' }] });
  const listed = unwrap(
    await mailroom.GET('/emails', { params: { query: { limit: 10, email: to, status: 'queued' } } }),
  );
  expect(listed.items.map((e) => e.id)).toEqual([sent.emails[0].email]);
});

test('track with the public key; the public key elsewhere is 403 PUBLIC_KEY_NOT_ALLOWED', async () => {
  const browser = createMailroomClient({ apiKey: served.project.publicKey, baseUrl: served.baseUrl });
  const email = recipient('track');
  const tracked = await browser.POST('/v1/track', { body: { event: 'signed-up', email, data: { plan: 'pro' } } });
  expect(tracked.response.status).toBe(200);
  expect(unwrap(tracked)).toMatchObject({ contact: expect.any(String), event: expect.any(String) });

  const refused = await failure(browser.GET('/contacts', { params: { query: { limit: 5 } } }));
  expect(refused).toMatchObject({ status: 403, code: 'PUBLIC_KEY_NOT_ALLOWED', retryable: false });
  expect(refused.requestId).toEqual(expect.any(String));

  const events = unwrap(await mailroom.GET('/events', { params: { query: { limit: 10, email, name: 'signed-up' } } }));
  expect(events.items.map((e) => e.name)).toEqual(['signed-up']);
});

test('contacts: upsert, read, update, and every page through the iterator', async () => {
  const tag = `pg${Date.now()}`;
  const created = await mailroom.POST('/contacts', { body: { email: recipient(tag), data: { tag } } });
  expect(created.response.status).toBe(201);
  const contact = unwrap(created);
  const updated = unwrap(
    await mailroom.PATCH('/contacts/{id}', {
      params: { path: { id: contact.id } },
      body: { subscribed: false, data: { plan: 'team' } },
    }),
  );
  expect(updated).toMatchObject({ id: contact.id, subscribed: false, data: { tag, plan: 'team' } });
  expect(unwrap(await mailroom.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).email).toBe(
    contact.email,
  );

  for (let i = 0; i < 4; i++)
    unwrap(await mailroom.POST('/contacts', { body: { email: recipient(tag), data: { tag } } }));
  requests.length = 0;
  const emails: string[] = [];
  for await (const c of paginate((cursor) =>
    mailroom.GET('/contacts', { params: { query: { limit: 2, cursor, search: tag } } }),
  )) {
    emails.push(c.email);
  }
  expect(emails).toHaveLength(5);
  expect(new Set(emails).size).toBe(5);
  // Three pages of 2, 2 and 1; the second and third asked for with the previous page's cursor.
  expect(requests).toHaveLength(3);
  expect(requests[0]).not.toContain('cursor=');
  expect(requests.slice(1).every((r) => r.includes('cursor='))).toBe(true);
});

test('templates: create and render', async () => {
  const template = unwrap(
    await mailroom.POST('/templates', {
      body: { name: 'Welcome', subject: 'Hi {{name}}', body: '<p>Welcome, {{name}}</p>' },
    }),
  );
  const rendered = unwrap(
    await mailroom.POST('/templates/{id}/render', {
      params: { path: { id: template.id } },
      body: { data: { name: 'Ada' } },
    }),
  );
  expect(rendered).toMatchObject({ subject: 'Hi Ada' });
});

test('segments: preview a filter, create it, list its contacts', async () => {
  const plan = `plan${Date.now()}`;
  unwrap(await mailroom.POST('/contacts', { body: { email: recipient('seg'), data: { plan } } }));
  const filter = [{ field: 'data.plan', operator: 'equals', value: plan }];
  const preview = unwrap(await mailroom.POST('/segments/preview', { body: { filter, sampleSize: 5 } }));
  expect(preview).toMatchObject({ count: 1 });
  const segment = unwrap(await mailroom.POST('/segments', { body: { name: `Plan ${plan}`, filter } }));
  const members = unwrap(
    await mailroom.GET('/segments/{id}/contacts', { params: { path: { id: segment.id }, query: { limit: 10 } } }),
  );
  expect(members.items).toHaveLength(1);
});

test('campaigns: create a draft and read its stats', async () => {
  const campaign = unwrap(
    await mailroom.POST('/campaigns', {
      body: {
        name: 'Launch',
        subject: 'News',
        body: '<p>News</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
        from: `news@${served.project.domain}`,
        audienceType: 'ALL',
      },
    }),
  );
  expect(campaign.status).toBe('DRAFT');
  const stats = unwrap(await mailroom.GET('/campaigns/{id}/stats', { params: { path: { id: campaign.id } } }));
  expect(stats).toMatchObject({ sent: 0 });
});

test('workflows: create and list', async () => {
  const workflow = unwrap(
    await mailroom.POST('/workflows', { body: { name: 'Onboarding', trigger: { type: 'EVENT', event: 'signed-up' } } }),
  );
  const list = unwrap(await mailroom.GET('/workflows', { params: { query: { limit: 100 } } }));
  expect(list.items.map((w) => w.id)).toContain(workflow.id);
});

test('domains: add and read', async () => {
  const domain = `client${Date.now()}.acme.test`;
  const added = await mailroom.POST('/domains', { body: { domain } });
  expect(added.response.status).toBe(201);
  const d = unwrap(added);
  expect(unwrap(await mailroom.GET('/domains/{id}', { params: { path: { id: d.id } } }))).toMatchObject({
    domain,
    verified: false,
  });
});

test('webhooks: create an endpoint and list it', async () => {
  const endpoint = unwrap(
    await mailroom.POST('/webhooks/endpoints', {
      body: { url: 'https://hooks.example.com/mail', eventTypes: ['email.*'] },
    }),
  );
  expect(endpoint.secret).toMatch(/^whsec_/);
  const list = unwrap(await mailroom.GET('/webhooks/endpoints', { params: { query: { limit: 100 } } }));
  expect(list.items.map((e) => e.id)).toContain(endpoint.id);
});

test('suppressions: add, read, delete', async () => {
  const email = recipient('supp');
  unwrap(await mailroom.POST('/suppressions', { body: { email, note: 'asked by phone' } }));
  expect(unwrap(await mailroom.GET('/suppressions/{email}', { params: { path: { email } } }))).toMatchObject({ email });
  expect(unwrap(await mailroom.DELETE('/suppressions/{email}', { params: { path: { email } } }))).toMatchObject({
    deleted: true,
  });
  const gone = await failure(mailroom.GET('/suppressions/{email}', { params: { path: { email } } }));
  expect(gone.status).toBe(404);
});

test('verify an address', async () => {
  const result = unwrap(await mailroom.POST('/v1/verify', { body: { email: 'someone@acme.test' } }));
  expect(result).toMatchObject({ email: 'someone@acme.test', valid: true, hasMxRecords: true });
});

test('errors: 422 with errors[] naming the field, 404, 401 for an unknown key', async () => {
  const invalid = await mailroom.POST('/v1/send', {
    body: { to: 'not an address', subject: 's', body: 'b', from: `a@${served.project.domain}` },
  });
  expect(invalid.response.status).toBe(422);
  expect(invalid.error).toMatchObject({
    success: false,
    code: 'VALIDATION_ERROR',
    error: { code: 'VALIDATION_ERROR', statusCode: 422 },
  });
  expect(invalid.error?.error.errors?.[0]).toMatchObject({
    field: expect.stringMatching(/^to/),
    code: expect.any(String),
  });
  // Typed on every operation's error body (optional until every server sends it); a validation error is not retryable.
  const retryable: boolean | undefined = invalid.error?.error.retryable;
  expect(retryable ?? false).toBe(false);

  const missing = await failure(
    mailroom.GET('/templates/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } }),
  );
  expect(missing).toMatchObject({ status: 404, code: 'NOT_FOUND', retryable: false });

  const stranger = createMailroomClient({ apiKey: `sk_${'0'.repeat(48)}`, baseUrl: served.baseUrl });
  expect(await failure(stranger.GET('/templates', { params: { query: { limit: 1 } } }))).toMatchObject({
    status: 401,
    code: 'UNAUTHORIZED',
  });
});
