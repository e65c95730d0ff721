/**
 * The SMTP relay end to end: a message submitted over STARTTLS is delivered by the worker to SES (the emulator
 * behind its recorder) as the client composed it, once per envelope recipient, Bcc included and never disclosed;
 * a test key's message reaches the test sink, not SES; a suppressed recipient is not sent to.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { createTestProject, parseMail, recipient, sesRecordedTo, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';
import { smtpClient, smtpEnv, startTestRelay, type TestRelay } from '../support/smtp';

let relay: TestRelay;
const e2e = useE2e({ env: () => smtpEnv() });
beforeAll(async () => {
  relay = await startTestRelay(e2e.api);
  e2e.onTeardown(() => relay.close());
});

test('To and Bcc recipients each receive the message as composed; the Bcc recipient is in no header', async () => {
  const p = await createTestProject(e2e.api.database);
  const [to, bcc] = [recipient('to'), recipient('bcc')];
  const subject = `Relayed ${randomBytes(3).toString('hex')} — ünïcode`;
  const info = await smtpClient(relay.starttlsPort, p.secretKey).sendMail({
    from: `Ann <ann@${p.domain}>`,
    to,
    bcc,
    subject,
    text: 'plain part',
    html: '<p>html part</p>',
    headers: { 'X-Campaign-Ref': 'abc', 'X-SES-CONFIGURATION-SET': 'not-yours' },
    attachments: [{ filename: 'note.txt', content: 'attached' }],
  });
  const sent = await waitFor(
    async () => {
      const s = await sesSendsTo([to, bcc]);
      return s.length >= 2 ? s : undefined;
    },
    30_000,
    'both deliveries',
  );
  expect(sent).toHaveLength(2);
  expect(
    sent
      .map((s) => s.to)
      .flat()
      .sort(),
  ).toEqual([to, bcc].sort());
  for (const s of sent) {
    expect(s.raw).not.toContain(bcc);
    const mail = await parseMail(s);
    expect(mail.subject).toBe(subject);
    expect(mail.messageId).toBe(info.messageId);
    expect(mail.text?.trim()).toBe('plain part');
    expect(mail.html).toContain('<p>html part</p>');
    expect(mail.attachments.map((a) => a.filename)).toEqual(['note.txt']);
    expect(mail.headers.get('x-campaign-ref')).toBe('abc');
    expect(mail.headers.has('x-ses-configuration-set')).toBe(false);
    expect(mail.headers.has('bcc')).toBe(false);
  }
  const ids = await e2e.api.database.pool.query<{ id: string; status: string }>(
    'select id, status from emails where project_id = $1',
    [p.id],
  );
  await waitFor(
    async () => {
      const statuses = await Promise.all(
        ids.rows.map(
          async (r) =>
            (await request(e2e.api.app).get(`/emails/${r.id}`).set('Authorization', p.auth)).body.data.status as string,
        ),
      );
      return statuses.every((s) => s === 'sent') || undefined;
    },
    20_000,
    'emails sent',
  );
});

test("a test key's message goes to the test sink, not SES; a suppressed recipient is not sent to", async () => {
  const p = await createTestProject(e2e.api.database);
  const created = await request(e2e.api.app)
    .post('/admin/projects')
    .set('Authorization', 'Bearer test-admin-token-0123456789')
    .send({ name: 'relay-test-mode' });
  const testProject = created.body.data;
  await request(e2e.api.app)
    .post(`/admin/projects/${testProject.id}/domains`)
    .set('Authorization', 'Bearer test-admin-token-0123456789')
    .send({ domain: `tm.${p.domain}`, verified: true });
  const sink = recipient('sink');
  await smtpClient(relay.starttlsPort, testProject.testSecretKey).sendMail({
    from: `a@tm.${p.domain}`,
    to: sink,
    subject: 'to the sink',
    text: 'x',
  });
  const [row] = (
    await e2e.api.database.pool.query<{ id: string }>('select id from emails where project_id = $1 and to_email = $2', [
      testProject.id,
      sink,
    ])
  ).rows;
  const raw = await waitFor(
    async () => {
      const r = await request(e2e.api.app)
        .get(`/emails/${row.id}/raw`)
        .set('Authorization', `Bearer ${testProject.testSecretKey}`);
      return r.status === 200 ? r.text : undefined;
    },
    20_000,
    'the test message',
  );
  expect(raw).toContain('Subject: to the sink');
  expect(await sesRecordedTo([sink])).toHaveLength(0);

  const suppressed = recipient('suppressed');
  expect(
    (await request(e2e.api.app).post('/suppressions').set('Authorization', p.auth).send({ email: suppressed })).status,
  ).toBeLessThan(300);
  const ok = recipient('ok');
  await smtpClient(relay.starttlsPort, p.secretKey).sendMail({
    from: `a@${p.domain}`,
    to: [suppressed, ok],
    subject: 's',
    text: 'x',
  });
  await waitFor(async () => ((await sesSendsTo([ok])).length ? true : undefined), 20_000, 'the unsuppressed delivery');
  const rows = await e2e.api.database.pool.query<{ to_email: string; status: string }>(
    'select to_email, status from emails where project_id = $1 and to_email = any($2)',
    [p.id, [suppressed, ok]],
  );
  expect(rows.rows.find((r) => r.to_email === suppressed)?.status).toBe('suppressed');
  expect(await sesRecordedTo([suppressed])).toHaveLength(0);
});
