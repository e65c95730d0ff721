/**
 * The unsubscribe page's "pause" choice in headless Chromium with JavaScript turned off: the page loads under its
 * Content-Security-Policy, the "Pause for 30 days" button posts the plain form with the signed token, and the
 * answer page says the mail is paused; the contact is snoozed for 30 days and stays subscribed.
 */
import { eq } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { projects } from '@mailroom/db/schema/projects';
import { client, createTestProject, recipient } from '../support/harness';
import { useBrowserE2e } from '../support/browser';

const DAY = 86_400_000;

const web = useBrowserE2e();

test('without JavaScript, "Pause for 30 days" snoozes the contact for 30 days and keeps it subscribed', async () => {
  const p = await createTestProject(web.api.database);
  const as = client(web.api.app, p);
  const to = recipient('browserpause');
  const sent = await as.post('/v1/send', {
    to,
    from: `a@${p.domain}`,
    subject: 'S',
    body: '<p>B</p>',
    subscribed: true,
  });
  const { email: emailId, contact } = sent.body.data.emails[0] as { email: string; contact: { id: string } };
  const [{ key }] = await web.api.database.db
    .select({ key: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, p.id));
  const token = createUnsubscribeToken(emailId, key);

  const context = await web.browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const violations: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
  });
  const before = Date.now();
  expect((await page.goto(`${web.base}/unsubscribe/${token}`))?.status()).toBe(200);
  await page.getByRole('button', { name: 'Pause for 30 days' }).click();
  await page.waitForURL(`${web.base}/unsubscribe/${token}/pause`);
  expect(await page.getByRole('heading').textContent()).toBe('Paused');
  expect(await page.textContent('body')).toContain(to);
  expect(violations).toEqual([]);
  await context.close();

  const stored = (await as.get(`/contacts/${contact.id}`)).body.data;
  expect(stored.subscribed).toBe(true);
  expect(Date.parse(stored.snoozedUntil)).toBeGreaterThanOrEqual(before + 30 * DAY - 1000);
  expect(Date.parse(stored.snoozedUntil)).toBeLessThanOrEqual(Date.now() + 30 * DAY + 1000);
});
