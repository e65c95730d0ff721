/**
 * The preference center in a real headless browser (Debian's chromium driven by playwright-core, as the dashboard
 * test does) with JavaScript switched off: the unsubscribe link of a project with topics shows a checkbox per public
 * topic (private ones hidden), checked as the contact stands; saving the form records exactly the boxes' state;
 * a topic email's page leaves that topic with one button; "unsubscribe from all" leaves all marketing email. Every
 * request stays on this host.
 */
import type { Page } from 'playwright-core';
import { eq, sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { createConfirmationToken } from '@mailroom/contacts/double-opt-in';
import { projects } from '@mailroom/db/schema/projects';
import { client, createTestProject, recipient, type TestProject } from '../support/harness';
import { useBrowserE2e } from '../support/browser';

const web = useBrowserE2e();

/** A sent marketing email to the contact (of `topicId`, if given), and its unsubscribe token. */
async function linkFor(p: TestProject, contactId: string, to: string, topicId?: string): Promise<string> {
  const id = newId();
  await web.api.database.db.execute(sql`
    insert into emails (id, project_id, contact_id, marketing, source, to_email, from_email, subject, body, body_format, status, topic_id)
    values (${id}::uuid, ${p.id}::uuid, ${contactId}::uuid, true, 'transactional', ${to}, ${`news@${p.domain}`}, 'S', 'B', 'html', 'sent', ${topicId ?? null}::uuid)`);
  const [{ key }] = await web.api.database.db
    .select({ key: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, p.id));
  return createUnsubscribeToken(id, key, topicId);
}

async function offlinePage(): Promise<{ page: Page; offsite: string[] }> {
  const context = await web.browser.newContext({ javaScriptEnabled: false });
  const offsite: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1') return route.continue();
    offsite.push(url.hostname);
    return route.abort();
  });
  return { page: await context.newPage(), offsite };
}

const box = (page: Page, name: string) => page.getByRole('checkbox', { name });

test('checkboxes per public topic, saved without JavaScript; a topic email leaves its topic; unsubscribe from all', async () => {
  const p = await createTestProject(web.api.database);
  const as = client(web.api.app, p);
  const mk = async (name: string, defaultSubscription: string, visibility = 'public') =>
    (await as.post('/topics', { name, defaultSubscription, visibility, description: `About ${name}` })).body.data
      .id as string;
  const news = await mk('News', 'opt_out');
  const deals = await mk('Deals', 'opt_in');
  const billing = await mk('Billing notices', 'opt_out', 'private');
  const to = recipient('pref');
  const contactId = (await as.post('/contacts', { email: to, subscribed: true })).body.data.id as string;
  const standing = async () =>
    Object.fromEntries(
      ((await as.get(`/contacts/${contactId}`)).body.data.topics as { topicId: string; subscribed: boolean }[]).map(
        (t) => [t.topicId, t.subscribed],
      ),
    );

  const { page, offsite } = await offlinePage();
  await page.goto(`${web.base}/unsubscribe/${await linkFor(p, contactId, to)}`);
  expect(await page.title()).toBe('Email preferences');
  expect(await page.textContent('body')).toContain(to);
  expect(await box(page, 'News').isChecked()).toBe(true);
  expect(await box(page, 'Deals').isChecked()).toBe(false);
  expect(await page.getByRole('checkbox').count()).toBe(2);
  expect(await page.textContent('body')).not.toContain('Billing notices');
  expect(await page.textContent('body')).toContain('About Deals');

  await box(page, 'News').uncheck();
  await box(page, 'Deals').check();
  await page.getByRole('button', { name: 'Save preferences' }).click();
  await page.waitForSelector('text=Preferences saved');
  expect(await standing()).toEqual({ [news]: false, [deals]: true, [billing]: true });
  expect((await as.get(`/contacts/${contactId}`)).body.data.subscribed).toBe(true);

  // Back on the page, the boxes show what was saved; saving again unchanged records nothing.
  await page.goBack();
  await page.reload();
  expect(await box(page, 'News').isChecked()).toBe(false);
  expect(await box(page, 'Deals').isChecked()).toBe(true);
  await page.getByRole('button', { name: 'Save preferences' }).click();
  await page.waitForSelector('text=Preferences saved');
  const events = await web.api.database.db.execute<{ name: string; data: { method: string } }>(
    sql`select name, data from events where contact_id = ${contactId}::uuid and name like 'contact.topic_%'`,
  );
  expect(events.rows.map((e) => [e.name, e.data.method]).sort()).toEqual([
    ['contact.topic_subscribed', 'link'],
    ['contact.topic_unsubscribed', 'link'],
  ]);

  // The page of a Deals email offers to leave Deals alone.
  await page.goto(`${web.base}/unsubscribe/${await linkFor(p, contactId, to, deals)}`);
  await page.getByRole('button', { name: 'Unsubscribe from Deals' }).click();
  await page.waitForSelector('text=no longer receive email about Deals');
  expect(await standing()).toEqual({ [news]: false, [deals]: false, [billing]: true });
  expect((await as.get(`/contacts/${contactId}`)).body.data.subscribed).toBe(true);

  // Unsubscribe from all: the global switch.
  await page.goto(`${web.base}/unsubscribe/${await linkFor(p, contactId, to)}`);
  await page.getByRole('button', { name: 'Unsubscribe from all marketing email' }).click();
  await page.waitForSelector('h1:has-text("Unsubscribed")');
  expect((await as.get(`/contacts/${contactId}`)).body.data.subscribed).toBe(false);
  await page.goto(`${web.base}/unsubscribe/${await linkFor(p, contactId, to)}`);
  expect(await page.textContent('body')).toContain('You are unsubscribed from all marketing email');
  expect(offsite).toEqual([]);
});

test("double opt-in: the confirmation page's button confirms in the browser, recording its user agent", async () => {
  const p = await createTestProject(web.api.database);
  const as = client(web.api.app, p);
  const created = await as.post('/contacts', {
    email: recipient('doib'),
    doubleOptIn: true,
    confirmationFrom: `hello@${p.domain}`,
  });
  const { id: confirmationId } = created.body.data._meta.confirmation;
  const [{ key }] = await web.api.database.db
    .select({ key: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, p.id));
  const { page } = await offlinePage();
  await page.goto(`${web.base}/confirm?token=${createConfirmationToken(confirmationId, key)}`);
  expect((await as.get(`/contacts/${created.body.data.id}`)).body.data.subscribed).toBe(false);
  await page.getByRole('button', { name: 'Confirm' }).click();
  await page.waitForSelector('text=Subscription confirmed');
  const c = (await as.get(`/contacts/${created.body.data.id}`)).body.data;
  expect(c.subscribed).toBe(true);
  expect(c.confirmations[0]).toMatchObject({ status: 'confirmed', ip: expect.stringContaining('127.0.0.1') });
  expect(c.confirmations[0].userAgent).toMatch(/Chrome/);
});
