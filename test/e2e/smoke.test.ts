import request from 'supertest';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import {
  createTestProject,
  parseMail,
  recipient,
  sesSendsTo,
  startTestApi,
  testConfig,
  waitFor,
  type TestApi,
} from '../support/harness';

let api: TestApi;
let worker: RunningWorker;

beforeAll(async () => {
  const config = testConfig();
  api = await startTestApi(config);
  worker = await startWorker(config, { healthPort: null });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

test('smoke: send one email end to end', async () => {
  const p = await createTestProject(api.database);
  const to = recipient();
  const res = await request(api.app)
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
