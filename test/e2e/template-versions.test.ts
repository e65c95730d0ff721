/**
 * Template versions through the worker and the SES recorder: a campaign pinned to version 1 sends version 1's
 * content after version 2 is published (and its emails record version 1), while an unpinned campaign sends version
 * 2; a workflow SEND_EMAIL step that follows the latest published version sends the version published after the
 * workflow was built, and a pinned step keeps its version.
 *
 * The file has its own database: the worker's reconciler adopts every SENDING campaign of its database.
 */
import { sql } from 'drizzle-orm';
import {
  client,
  createTestProject,
  parseMail,
  recipient,
  sesSendsTo,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({
  isolated: true,
  env: { SES_MAX_SEND_RATE: '50', CAMPAIGN_TICK_MS: '100', WORKFLOW_INBOX_POLL_MS: '200' },
});

/** The subject of the one message SES accepted for `to`. */
async function subjectAt(to: string): Promise<string | undefined> {
  const [send] = await waitFor(
    async () => {
      const sends = await sesSendsTo([to]);
      return sends.length > 0 ? sends : undefined;
    },
    30_000,
    `a message to ${to} at SES`,
  );
  return (await parseMail(send)).subject;
}

async function templateV1(p: TestProject) {
  const as = client(e2e.api.app, p);
  const id = (
    await as.post('/templates', {
      name: 't',
      subject: 'Version one',
      body: '<p>one</p><a href="{{unsubscribeUrl}}">stop</a>',
      type: 'MARKETING',
      from: `news@${p.domain}`,
    })
  ).body.data.id as string;
  return { as, id };
}

test('a campaign pinned to version 1 sends version 1 after version 2 is published; an unpinned one sends version 2', async () => {
  const p = await createTestProject(e2e.api.database);
  const { as, id } = await templateV1(p);
  const [pinnedTo, latestTo] = [recipient('pin'), recipient('latest')];
  const campaign = async (to: string, pin: object) => {
    const created = await as.post('/campaigns', {
      name: 'c',
      templateId: id,
      ...pin,
      from: `news@${p.domain}`,
      audienceType: 'FILTERED',
      audienceFilter: [{ field: 'email', operator: 'equals', value: to }],
    });
    expect(created.status).toBe(201);
    return created.body.data.id as string;
  };
  await as.post('/contacts', { email: pinnedTo });
  await as.post('/contacts', { email: latestTo });
  const pinned = await campaign(pinnedTo, { templateVersion: 1 });
  const latest = await campaign(latestTo, {});

  // Version 2 is published after both campaigns were written, before they are sent.
  expect((await as.patch(`/templates/${id}`, { subject: 'Version two' })).body.data.version).toBe(2);
  for (const c of [pinned, latest]) expect((await as.post(`/campaigns/${c}/send`, {})).status).toBe(200);
  for (const c of [pinned, latest])
    await waitFor(async () => (await as.get(`/campaigns/${c}`)).body.data.status === 'SENT', 30_000, 'campaign SENT');

  expect(await subjectAt(pinnedTo)).toBe('Version one');
  expect(await subjectAt(latestTo)).toBe('Version two');
  const versions = await e2e.api.database.db.execute<{
    campaign_id: string;
    template_id: string;
    template_version: number;
  }>(
    sql`select campaign_id, template_id, template_version from emails where campaign_id in (${pinned}::uuid, ${latest}::uuid)`,
  );
  expect(new Map(versions.rows.map((r) => [r.campaign_id, [r.template_id, r.template_version]]))).toEqual(
    new Map([
      [pinned, [id, 1]],
      [latest, [id, 2]],
    ]),
  );
  const [{ id: pinnedEmail }] = (
    await e2e.api.database.db.execute<{ id: string }>(sql`select id from emails where campaign_id = ${pinned}::uuid`)
  ).rows;
  expect((await as.get(`/emails/${pinnedEmail}`)).body.data).toMatchObject({ templateId: id, templateVersion: 1 });
});

test('a workflow step following the latest version sends the version published after the workflow was built; a pinned step keeps its own', async () => {
  const p = await createTestProject(e2e.api.database);
  const { as, id } = await templateV1(p);
  const workflow = async (config: object) => {
    const wid = (await as.post('/workflows', { name: 'wf', trigger: { type: 'MANUAL' } })).body.data.id as string;
    expect(
      (
        await as.put(`/workflows/${wid}/graph`, {
          steps: [{ key: 's', type: 'SEND_EMAIL', config: { templateId: id, ...config } }],
          transitions: [{ from: null, to: 's' }],
        })
      ).status,
    ).toBe(200);
    expect((await as.patch(`/workflows/${wid}`, { enabled: true })).status).toBe(200);
    return wid;
  };
  const following = await workflow({});
  const pinned = await workflow({ templateVersion: 1 });
  // Published through the draft flow this time.
  await as.patch(`/templates/${id}?draft=true`, { subject: 'Version two' });
  expect((await as.post(`/templates/${id}/publish`, {})).body.data.version).toBe(2);

  const [a, b] = [recipient('wflatest'), recipient('wfpinned')];
  for (const [wid, to] of [
    [following, a],
    [pinned, b],
  ]) {
    await as.post('/contacts', { email: to });
    expect((await as.post(`/workflows/${wid}/executions`, { email: to })).status).toBe(201);
  }
  expect(await subjectAt(a)).toBe('Version two');
  expect(await subjectAt(b)).toBe('Version one');
  const rows = await e2e.api.database.db.execute<{ to_email: string; template_version: number }>(
    sql`select to_email, template_version from emails where project_id = ${p.id}::uuid and source = 'workflow'`,
  );
  expect(Object.fromEntries(rows.rows.map((r) => [r.to_email, r.template_version]))).toEqual({ [a]: 2, [b]: 1 });
});
