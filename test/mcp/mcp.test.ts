/**
 * The MCP server (apps/mcp) as a host runs it: spawned over stdio and driven through the MCP SDK's client against
 * a running API. Lists the tools, calls each one, and checks that a campaign is never sent without `confirm: true`.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { createMailroomClient, type MailroomClient } from '@mailroom/client/client';
import { unwrap } from '@mailroom/client/errors';
import { recipient } from '../support/harness';
import { serveApi, type ServedApi } from '../client/support';

const ROOT = path.resolve(__dirname, '..', '..');
const MAIN = path.join(ROOT, 'apps/mcp/src/main.ts');
const TSX_ENV = { TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'), NODE_NO_WARNINGS: '1' };

let served: ServedApi;
let mailroom: MailroomClient;
let mcp: Client;
let stderr = '';

beforeAll(async () => {
  served = await serveApi();
  mailroom = createMailroomClient({ apiKey: served.project.secretKey, baseUrl: served.baseUrl });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--import', 'tsx', MAIN],
    cwd: ROOT,
    env: { ...TSX_ENV, MAILROOM_API_KEY: served.project.secretKey, MAILROOM_BASE_URL: served.baseUrl },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  mcp = new Client({ name: 'mailroom-test', version: '0.0.0' });
  await mcp.connect(transport);
});
afterAll(async () => {
  await mcp?.close();
  await served?.close();
});

interface ToolAnswer {
  isError: boolean;
  text: string;
  /** The text parsed as JSON (the tools answer JSON), read field by field by the assertions. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each tool's own answer shape, checked by the assertions
  json: any;
}

/** Calls a tool; `json` is its text parsed when it is JSON. */
async function call(name: string, args: Record<string, unknown>): Promise<ToolAnswer> {
  const res = await mcp.callTool({ name, arguments: args });
  const content = res.content as { type: string; text: string }[];
  const text = content.map((c) => c.text).join('\n');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { isError: res.isError === true, text, json };
}

test('lists the tools, each with a described input schema; announces itself', async () => {
  const { tools } = await mcp.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual(
    [
      'create_segment',
      'draft_campaign',
      'find_contact',
      'get_campaign_stats',
      'get_email_status',
      'list_recent_emails',
      'preview_segment',
      'send_campaign',
      'send_email',
      'track_event',
      'update_contact',
    ].sort(),
  );
  for (const t of tools) {
    expect(t.description?.length).toBeGreaterThan(20);
    const props = Object.entries((t.inputSchema.properties ?? {}) as Record<string, { description?: string }>);
    expect(props.length).toBeGreaterThan(0);
    expect(props.filter(([, p]) => !p.description).map(([name]) => `${t.name}.${name}`)).toEqual([]);
  }
  const send = tools.find((t) => t.name === 'send_campaign')!;
  expect(send.inputSchema.properties).toHaveProperty('confirm');
  expect(send.annotations).toMatchObject({ destructiveHint: true });
  expect(mcp.getServerVersion()).toMatchObject({ name: 'mailroom' });
  expect(stderr).toContain('mailroom MCP server');
});

test('send_email (plain and from a template), then list_recent_emails and get_email_status', async () => {
  const to = recipient('mcp');
  const sent = await call('send_email', {
    to,
    subject: 'Hi {{name}}',
    body: '<p>Hello {{name}}</p>',
    from: `app@${served.project.domain}`,
    data: { name: 'Ada' },
  });
  expect(sent.isError).toBe(false);
  expect(sent.json.emails).toEqual([{ email: to, emailId: expect.any(String), contactId: expect.any(String) }]);

  const template = unwrap(
    await mailroom.POST('/templates', {
      body: {
        name: 'Receipt',
        subject: 'Receipt {{order}}',
        body: '<p>Order {{order}}</p>',
        from: `billing@${served.project.domain}`,
      },
    }),
  );
  const fromTemplate = await call('send_email', {
    to: [recipient('mcp-t')],
    template: template.id,
    data: { order: 'A-1' },
  });
  expect(fromTemplate.isError).toBe(false);

  const recent = await call('list_recent_emails', { limit: 2 });
  expect(recent.isError).toBe(false);
  expect(recent.json.emails.map((e: { id: string }) => e.id)).toEqual([
    fromTemplate.json.emails[0].emailId,
    sent.json.emails[0].emailId,
  ]);
  expect(recent.json.emails[1]).toMatchObject({ status: 'queued', to, subject: 'Hi {{name}}' });
  const mine = await call('list_recent_emails', { email: to, status: 'queued' });
  expect(mine.json).toMatchObject({ total: 1, nextCursor: null, emails: [{ id: sent.json.emails[0].emailId }] });
  const wrongStatus = await call('list_recent_emails', { status: 'lost' });
  expect(wrongStatus).toMatchObject({
    isError: true,
    text: expect.stringMatching(/^INVALID_PARAMETERS: [\s\S]*\n- status: /),
  });

  const status = await call('get_email_status', {
    ids: [sent.json.emails[0].emailId, fromTemplate.json.emails[0].emailId],
  });
  expect(status.isError).toBe(false);
  expect(status.json).toEqual([
    expect.objectContaining({ id: sent.json.emails[0].emailId, status: 'queued', to, subject: 'Hi {{name}}' }),
    expect.objectContaining({
      id: fromTemplate.json.emails[0].emailId,
      status: 'queued',
      subject: 'Receipt {{order}}',
    }),
  ]);
});

test('track_event, find_contact (with its events) and update_contact by address', async () => {
  const email = recipient('mcp-c');
  const tracked = await call('track_event', { email, event: 'signed-up', data: { plan: 'pro' } });
  expect(tracked.isError).toBe(false);
  expect(tracked.json).toMatchObject({ contact: expect.any(String), event: expect.any(String) });

  const found = await call('find_contact', { email: email.toUpperCase() });
  expect(found.isError).toBe(false);
  expect(found.json).toMatchObject({ email, subscribed: true, data: { plan: 'pro' } });
  expect(found.json.recentEvents.map((e: { name: string }) => e.name)).toContain('signed-up');

  const updated = await call('update_contact', { email, subscribed: false, data: { plan: null, seats: 3 } });
  expect(updated.isError).toBe(false);
  expect(updated.json).toMatchObject({ id: found.json.id, subscribed: false, data: { seats: 3 } });
  expect(updated.json.data).not.toHaveProperty('plan');

  const byId = await call('find_contact', { id: found.json.id });
  expect(byId.json).toMatchObject({ email, subscribed: false });
});

test('preview_segment then create_segment from the same filter', async () => {
  const plan = `mcp${Date.now()}`;
  await call('track_event', { email: recipient('mcp-s'), event: 'joined', data: { plan } });
  const filter = [{ field: 'data.plan', operator: 'equals', value: plan }];
  const preview = await call('preview_segment', { filter });
  expect(preview.json).toMatchObject({ count: 1, sample: [expect.objectContaining({ subscribed: true })] });
  const segment = await call('create_segment', { name: `Plan ${plan}`, filter });
  expect(segment.isError).toBe(false);
  expect(segment.json).toMatchObject({ id: expect.any(String), name: `Plan ${plan}` });
});

test('draft_campaign; send_campaign refuses without confirm: true and sends nothing; with it, schedules; get_campaign_stats', async () => {
  const draft = await call('draft_campaign', {
    name: 'Spring',
    subject: 'Spring news',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
    from: `news@${served.project.domain}`,
    audience: 'ALL',
  });
  expect(draft.isError).toBe(false);
  expect(draft.json).toMatchObject({ status: 'DRAFT', audienceType: 'ALL' });
  const id: string = draft.json.id;

  for (const args of [{ id }, { id, confirm: false }]) {
    const refused = await call('send_campaign', args);
    expect(refused.isError).toBe(true);
    expect(refused.text).toMatch(/^CONFIRMATION_REQUIRED: Not sent\./);
  }
  expect(unwrap(await mailroom.GET('/campaigns/{id}', { params: { path: { id } } })).status).toBe('DRAFT');

  const at = new Date(Date.now() + 86_400_000).toISOString();
  const scheduled = await call('send_campaign', { id, confirm: true, scheduledAt: at });
  expect(scheduled.isError).toBe(false);
  expect(scheduled.json).toMatchObject({ id, status: 'SCHEDULED' });

  const stats = await call('get_campaign_stats', { id });
  expect(stats.isError).toBe(false);
  expect(stats.json).toMatchObject({ sent: 0 });
});

test("errors come back as tool errors with the API's code, message and fields", async () => {
  const invalid = await call('send_email', {
    to: 'not an address',
    subject: 's',
    body: 'b',
    from: `a@${served.project.domain}`,
  });
  expect(invalid.isError).toBe(true);
  expect(invalid.text).toMatch(/^VALIDATION_ERROR: /);
  expect(invalid.text).toMatch(/\n- to/);
  expect(invalid.text).toMatch(/request id /);

  const missing = await call('get_email_status', { ids: ['00000000-0000-4000-8000-000000000000'] });
  expect(missing).toMatchObject({ isError: true, text: expect.stringMatching(/^NOT_FOUND: /) });
  expect(await call('find_contact', { email: recipient('nobody') })).toMatchObject({
    isError: true,
    text: expect.stringMatching(/^NOT_FOUND: /),
  });
  expect(await call('find_contact', {})).toMatchObject({
    isError: true,
    text: expect.stringMatching(/^VALIDATION_ERROR: Give id or email/),
  });

  // The SDK checks arguments against the input schema before the tool runs.
  const badArgs = await call('send_campaign', { confirm: true });
  expect(badArgs.isError).toBe(true);
});

test('without MAILROOM_API_KEY the server exits at once, naming the variable', () => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...TSX_ENV, MAILROOM_BASE_URL: 'http://127.0.0.1:1' },
    encoding: 'utf8',
    input: '',
  });
  expect(run.status).toBe(1);
  expect(run.stderr).toContain('MAILROOM_API_KEY is required');
});
