/**
 * Operators' views on the API: `GET /metrics` (Prometheus, behind ADMIN_TOKEN) counts requests by route template
 * and status with latency histograms; `GET /admin/stats` gives each project's emails by status over the last hour
 * and day.
 */
import request from 'supertest';
import { ADMIN_TOKEN, client, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();
const admin = `Bearer ${ADMIN_TOKEN}`;

test('/metrics needs the admin token and counts requests by route template, never by raw path', async () => {
  expect((await request(ctx.api.app).get('/metrics')).status).toBe(401);
  expect(
    (await request(ctx.api.app).get('/metrics').set('Authorization', 'Bearer wrong-token-0123456789')).status,
  ).toBe(401);
  const c = client(ctx.api.app, ctx.p);
  const t = await c.post('/templates', { name: 't', subject: 's', body: 'b', type: 'TRANSACTIONAL' });
  await c.get(`/templates/${t.body.data.id}`);
  await c.get('/templates/00000000-0000-7000-8000-000000000000');
  await request(ctx.api.app).get('/no-such-route');
  const res = await request(ctx.api.app).get('/metrics').set('Authorization', admin);
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain/);
  const text = res.text;
  expect(text).toMatch(/mailroom_http_requests_total\{method="GET",route="\/templates\/:id",status="200"\} 1/);
  expect(text).toMatch(/mailroom_http_requests_total\{method="GET",route="\/templates\/:id",status="404"\} 1/);
  expect(text).toMatch(/mailroom_http_requests_total\{method="POST",route="\/templates",status="201"\} 1/);
  expect(text).toMatch(/mailroom_http_requests_total\{method="GET",route="unmatched",status="404"\} 1/);
  expect(text).toMatch(
    /mailroom_http_request_duration_seconds_bucket\{le="0.1",method="GET",route="\/templates\/:id"\} \d+/,
  );
  expect(text).toContain('mailroom_api_process_resident_memory_bytes');
  expect(text).not.toContain(t.body.data.id);
});

test('/admin/stats: emails per project by status over the last hour and day', async () => {
  const c = client(ctx.api.app, ctx.p);
  for (let i = 0; i < 3; i++) {
    expect(
      (await c.post('/v1/send', { to: recipient('st'), from: `s@${ctx.p.domain}`, subject: 'x', body: 'y' })).status,
    ).toBe(202);
  }
  await c.post('/suppressions', { email: 'blocked@inbox.test' });
  await c.post('/v1/send', { to: 'blocked@inbox.test', from: `s@${ctx.p.domain}`, subject: 'x', body: 'y' });
  expect((await request(ctx.api.app).get('/admin/stats')).status).toBe(401);
  const res = await request(ctx.api.app).get('/admin/stats').set('Authorization', admin);
  expect(res.status).toBe(200);
  const mine = res.body.data.projects.find((x: { projectId: string }) => x.projectId === ctx.p.id);
  expect(mine).toMatchObject({ lastHour: { queued: 3, suppressed: 1 }, lastDay: { queued: 3, suppressed: 1 } });
  expect(mine.projectName).toMatch(/^test /);
});
