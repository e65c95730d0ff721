import request from 'supertest';
import { createTestProject, parseMail, recipient, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e();

test('smoke: send one email end to end', async () => {
  const p = await createTestProject(e2e.api.database);
  const to = recipient();
  const res = await request(e2e.api.app)
    .post('/v1/send')
    .set('Authorization', p.auth)
    .send({
      to,
      from: `hello@${p.domain}`,
      subject: 'Hi {{name}}',
      body: '<p>Hello {{name}}</p>',
      data: { name: '<b>Ann</b>' },
    });
  expect(res.status).toBe(202);
  const [sent] = await waitFor(async () => {
    const s = await sesSendsTo([to]);
    return s.length ? s : undefined;
  });
  const mail = await parseMail(sent);
  expect(mail.subject).toBe('Hi <b>Ann</b>');
  expect(mail.html).toContain('Hello &lt;b&gt;Ann&lt;/b&gt;');
});
