/**
 * Inbound email starts workflows end to end (signed SES receipt notification → `email.received` on the sender's
 * contact → workflow inbox → worker), on a database of its own; a message SES judged a virus is stored but starts
 * nothing.
 */
import request from 'supertest';
import { randomBytes, randomUUID } from 'node:crypto';
import { client, createTestProject, recipient, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startSnsHarness, type SnsHarness } from '../support/sns';

let sns: SnsHarness;
const e2e = useE2e({
  isolated: true,
  env: async () => {
    sns = await startSnsHarness();
    e2e.onTeardown(() => sns.close());
    return { SNS_TOPIC_ARNS: sns.topicArn, SNS_CERT_HOSTS: sns.certHost, WORKFLOW_INBOX_POLL_MS: '200' };
  },
});

function receipt(p: TestProject, from: string, virus: 'PASS' | 'FAIL'): object {
  const to = `support@${p.domain}`;
  const raw = `From: ${from}\r\nTo: ${to}\r\nSubject: Help\r\nMessage-ID: <${randomUUID()}@outside.test>\r\n\r\nPlease help\r\n`;
  return {
    notificationType: 'Received',
    mail: { timestamp: new Date().toISOString(), messageId: `wf${randomBytes(10).toString('hex')}`, destination: [to] },
    receipt: {
      recipients: [to],
      spamVerdict: { status: 'PASS' },
      virusVerdict: { status: virus },
      action: { type: 'SNS', encoding: 'UTF8' },
    },
    content: raw,
  };
}

test('a message from a contact starts the workflow triggered by email.received; a virus starts nothing', async () => {
  const p = await createTestProject(e2e.api.database);
  const c = client(e2e.api.app, p);
  const domain = (await c.get('/domains')).body.data.items[0].id as string;
  expect(
    (await request(e2e.api.app).put(`/domains/${domain}/inbound`).set('Authorization', p.auth).send({ enabled: true }))
      .status,
  ).toBe(200);
  const created = await c.post('/workflows', { name: 'on reply', trigger: { type: 'EVENT', event: 'email.received' } });
  const wid = created.body.data.id as string;
  expect(
    (
      await c.put(`/workflows/${wid}/graph`, {
        steps: [{ key: 'x', type: 'EXIT', config: { reason: 'replied' } }],
        transitions: [{ from: null, to: 'x' }],
      })
    ).status,
  ).toBe(200);
  expect((await c.patch(`/workflows/${wid}`, { enabled: true })).status).toBe(200);

  const [clean, infected] = [recipient('clean'), recipient('infected')];
  const contacts = [
    (await c.post('/contacts', { email: clean })).body.data.id as string,
    (await c.post('/contacts', { email: infected })).body.data.id as string,
  ];
  const post = (body: object) =>
    request(e2e.api.app)
      .post('/webhooks/ses')
      .set('Content-Type', 'text/plain')
      .send(JSON.stringify(sns.notification(body)));
  expect((await post(receipt(p, infected, 'FAIL'))).status).toBe(200);
  expect((await post(receipt(p, clean, 'PASS'))).status).toBe(200);

  const executions = async () =>
    (await c.get(`/workflows/${wid}/executions?limit=100`)).body.data.items as {
      contactId: string;
      status: string;
      exitReason?: string;
    }[];
  const done = await waitFor(
    async () => {
      const list = await executions();
      return list.length > 0 && list.every((e) => e.status === 'EXITED') ? list : undefined;
    },
    20_000,
    'the execution to exit',
  );
  expect(done.map((e) => e.contactId)).toEqual([contacts[0]]);
  // The infected message's inbox had its turn too (the clean one came after it): still no execution for it.
  const inbound = (await c.get('/inbound')).body.data.items as { from: string; verdicts: { virus: string } }[];
  expect(inbound.find((i) => i.from === infected)?.verdicts.virus).toBe('FAIL');
  expect((await executions()).length).toBe(1);
});
