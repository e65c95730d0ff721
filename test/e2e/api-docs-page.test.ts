/**
 * `/docs` in a real headless browser (Debian's chromium driven by playwright-core), offline (every request off this
 * host is refused): Swagger UI renders the generated OpenAPI 3.1 document with its operations, the error responses
 * with their codes, and the outbound webhooks.
 */
import os from 'node:os';
import path from 'node:path';
import { useBrowserE2e } from '../support/browser';

const web = useBrowserE2e();

test('Swagger UI renders the document offline: operations, an error response with retryable, the webhooks', async () => {
  const context = await web.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const offsite: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1') return route.continue();
    offsite.push(url.hostname);
    return route.abort();
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${web.base}/docs`);
  await page.locator('.opblock-summary-path', { hasText: '/v1/send' }).first().waitFor({ timeout: 30_000 });
  await page.getByText('Webhooks', { exact: true }).first().waitFor({ timeout: 15_000 });
  await page.locator('.opblock-summary', { hasText: 'email.delivered' }).first().waitFor({ timeout: 15_000 });
  // Open POST /v1/send: its 429 names RATE_LIMITED as retryable.
  await page.locator('.opblock-summary', { hasText: '/v1/send' }).first().click();
  await page
    .getByText('`RATE_LIMITED` (retryable)')
    .or(page.getByText('RATE_LIMITED (retryable)'))
    .first()
    .waitFor({ timeout: 15_000 });
  await page.screenshot({ path: path.join(os.tmpdir(), 'mailroom-api-docs.png'), fullPage: false });
  expect(errors).toEqual([]);
  expect(offsite).toEqual([]);
  await context.close();
}, 90_000);
