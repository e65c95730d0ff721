/**
 * The queue dashboard in a real headless browser (Debian's chromium driven by playwright-core), offline (every
 * request off this host is refused): unauthenticated visits go to the login page, a wrong token is refused, the
 * right one opens bull-board listing every queue, and a failed job shows why it failed and is retried by the page's
 * own call; the same call from a page of another site (`localhost` is another site than `127.0.0.1`) is refused
 * with 403 on the browser's `Sec-Fetch-Site` (more: dashboard-csrf.test.ts).
 *
 * DASHBOARD_SCREENSHOT=<file> keeps a screenshot of the failed job in the dashboard (docs/queue-dashboard.png was
 * made so).
 */
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Queue, Worker } from 'bullmq';
import { QUEUE_KEYS, QueueName, queueCatalog } from '@mailroom/queues/catalog';
import { createRedis, queueOptions } from '@mailroom/queues/connection';
import { ADMIN_TOKEN, waitFor } from '../support/harness';
import { useBrowserE2e } from '../support/browser';

/** What the server answered each request: method, path, status and the browser's `Sec-Fetch-Site`. */
const answered: Array<{ method: string; path: string; status: number; site: string | undefined }> = [];

const web = useBrowserE2e((server) =>
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) =>
    res.on('finish', () =>
      answered.push({
        method: req.method ?? '',
        path: req.url ?? '',
        status: res.statusCode,
        site: req.headers['sec-fetch-site'],
      }),
    ),
  ),
);

test('login in a browser, every queue listed, a failed job with its reason, retried; wrong token refused; offline', async () => {
  // A job that fails, as an operator would find it.
  const connection = createRedis(web.api.config, 'worker');
  const failing = new Worker(
    QueueName.webhook,
    async () => {
      throw new Error('endpoint answered 500: upstream exploded');
    },
    { ...queueOptions(web.api.config, connection), autorun: true },
  );
  await failing.waitUntilReady();
  const producer = createRedis(web.api.config, 'producer');
  const q = new Queue(QueueName.webhook, queueOptions(web.api.config, producer));
  await q.add(
    'webhook',
    {
      deliveryId: '00000000-0000-7000-8000-000000000001',
      projectId: '00000000-0000-7000-8000-000000000002',
      generation: 0,
    },
    { jobId: 'wh-demo-0', attempts: 1 },
  );
  await waitFor(async () => (await q.getFailedCount()) > 0, 10_000, 'a failed job');
  await failing.close();
  connection.disconnect();

  const context = await web.browser.newContext({ viewport: { width: 1280, height: 800 } });
  const offsite: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1' || url.hostname === 'localhost') return route.continue();
    offsite.push(url.hostname);
    return route.abort();
  });
  const page = await context.newPage();
  await page.goto(`${web.base}/admin/queues`);
  expect(new URL(page.url()).pathname).toBe('/admin/login');

  await page.fill('#token', 'not-the-token-at-all');
  await page.click('button[type=submit]');
  await page.waitForSelector('.error');
  expect(await page.textContent('.error')).toContain('not right');

  await page.fill('#token', ADMIN_TOKEN);
  await Promise.all([page.waitForURL(`${web.base}/admin/queues**`), page.click('button[type=submit]')]);
  for (const name of QUEUE_KEYS.map((k) => queueCatalog[k].name)) {
    await page.getByText(name, { exact: true }).first().waitFor({ timeout: 15_000 });
  }

  await page.goto(`${web.base}/admin/queues/queue/webhook?status=failed`);
  await page.getByText('upstream exploded').first().waitFor({ timeout: 15_000 });
  await page.screenshot({
    path: process.env.DASHBOARD_SCREENSHOT ?? path.join(os.tmpdir(), 'mailroom-dashboard-failed.png'),
  });
  // From a page of another site, the calls a forged page could make with the browser (a simple POST that adds a
  // job, a PUT retry): refused, the job still failed.
  const other = await context.newPage();
  await other.goto(`${web.base.replace('127.0.0.1', 'localhost')}/admin/login`);
  await other.evaluate(async (url) => {
    await fetch(`${url}/admin/queues/api/queues/webhook/add`, {
      method: 'POST',
      mode: 'no-cors',
      credentials: 'include',
      body: '{"name":"forged","data":{}}',
    }).catch(() => undefined);
    await fetch(`${url}/admin/queues/api/queues/webhook/wh-demo-0/retry`, {
      method: 'PUT',
      credentials: 'include',
    }).catch(() => undefined);
  }, web.base);
  await other.close();
  const forged = answered.filter(
    (a) => a.path.startsWith('/admin/queues/api/') && a.method !== 'GET' && a.site === 'cross-site',
  );
  expect(forged.find((a) => a.method === 'POST')?.status).toBe(403);
  expect(forged.every((a) => a.status === 403 || (a.method === 'OPTIONS' && a.status >= 400))).toBe(true);
  expect(await q.getJobState('wh-demo-0')).toBe('failed');
  expect(
    (await q.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed'])).filter((j) => j.name === 'forged'),
  ).toEqual([]);
  // Retry it as the dashboard's retry button does, a fetch from the page with the browser's session: back to waiting.
  const retried = await page.evaluate(
    async (url) => (await fetch(`${url}/admin/queues/api/queues/webhook/wh-demo-0/retry`, { method: 'PUT' })).status,
    web.base,
  );
  expect(retried).toBe(204);
  expect(answered.find((a) => a.method === 'PUT' && a.status === 204)?.site).toBe('same-origin');
  expect(await q.getJobState('wh-demo-0')).toBe('waiting');
  await q.close();
  producer.disconnect();
  // Without the cookie or the token: a browser is sent to the login page, an API client gets 401.
  const anon = await fetch(`${web.base}/admin/queues/api/queues`, {
    redirect: 'manual',
    headers: { accept: 'text/html' },
  });
  expect(anon.status).toBe(303);
  expect(anon.headers.get('location')).toBe('/admin/login');
  expect((await fetch(`${web.base}/admin/queues/api/queues`, { headers: { accept: 'application/json' } })).status).toBe(
    401,
  );
  const withToken = await fetch(`${web.base}/admin/queues/api/queues`, {
    headers: { accept: 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(withToken.status).toBe(200);
  // All of that worked offline, and the page asked nothing of the outside (bull-board's web font link is dropped).
  expect(offsite).toEqual([]);
  const html = await (
    await fetch(`${web.base}/admin/queues`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  ).text();
  expect(html).toContain('Mailroom queues');
  expect(html).not.toMatch(/googleapis|gstatic/);
  await context.close();
}, 90_000);
