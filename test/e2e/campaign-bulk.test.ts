/**
 * Campaign mail through SES `SendBulkEmail` end to end (API → Postgres → campaign job → send jobs of 20 emails at
 * 400/s → worker → SES emulator behind the recording proxy): every recipient gets one message built from a bulk
 * entry, rendered by Mailroom for that recipient (contact data escaped in the HTML), with its own one-click
 * unsubscribe headers (RFC 8058) naming the URL in its body; and when SES denies the bulk call as a whole
 * (`AccessDeniedException`, an IAM policy without `ses:SendBulkEmail`), the campaign still goes out, one
 * `SendEmail` per email, and the next campaign does not try a bulk call again.
 */
import { sql } from 'drizzle-orm';
import {
  client,
  createTestProject,
  parseMail,
  recipient,
  sesFault,
  sesRecordedTo,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({ env: { SES_MAX_SEND_RATE: '400', CAMPAIGN_TICK_MS: '100' } });

/** `n` subscribed contacts of `p` named by `name(i)`; returns their addresses. */
async function seed(p: TestProject, tag: string, n: number, name: (i: number) => string): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient(tag));
  const names = to.map((_, i) => name(i));
  await e2e.api.database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${p.id}::uuid, e, e, true, jsonb_build_object('name', n)
    from unnest(${sql.param(to)}::text[], ${sql.param(names)}::text[]) as t(e, n)`);
  return to;
}

/** Creates and sends a campaign to every contact of `p`; resolves once it is SENT. */
async function sendCampaign(p: TestProject): Promise<void> {
  const as = client(e2e.api.app, p);
  const created = await as.post('/campaigns', {
    name: 'bulk',
    subject: 'News for {{name}}',
    body: '<p>Hi {{name}}</p><p><a href="{{unsubscribeUrl}}">Unsubscribe</a></p>',
    from: `news@${p.domain}`,
    fromName: 'Zoë News',
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  const id: string = created.body.data.id;
  expect((await as.post(`/campaigns/${id}/send`, {})).status).toBe(200);
  await waitFor(
    async () => (await as.get(`/campaigns/${id}`)).body.data.status === 'SENT' || undefined,
    45_000,
    'campaign SENT',
  );
}

test('each recipient gets one message from a bulk entry, rendered and escaped for it, with its own unsubscribe headers', async () => {
  const p = await createTestProject(e2e.api.database);
  const to = await seed(p, 'bulk', 40, (i) => (i === 0 ? '<b>Eve & "co"</b>' : `Ann${i}`));
  await sendCampaign(p);

  const sends = await sesRecordedTo(to);
  expect(sends.filter((s) => s.status === 200)).toHaveLength(40);
  expect(sends.every((s) => s.bulk === true && s.status === 200)).toBe(true);
  expect(new Set(sends.map((s) => s.to[0])).size).toBe(40);
  for (const send of sends) {
    const mail = await parseMail(send);
    const i = to.indexOf(send.to[0]);
    expect(mail.from?.value[0]).toEqual({ address: `news@${p.domain}`, name: 'Zoë News' });
    const html = mail.html as string;
    const url = /href="([^"]+)"/.exec(html)![1];
    expect(url).toMatch(/\/unsubscribe\//);
    expect(mail.headerLines.find((h) => h.key === 'list-unsubscribe-post')?.line).toBe(
      'List-Unsubscribe-Post: List-Unsubscribe=One-Click',
    );
    // Folded by the composer of the recorded message; unfolded, the email's own URL.
    const line = mail.headerLines.find((h) => h.key === 'list-unsubscribe')?.line.replace(/\r?\n\s+/g, ' ');
    expect(line).toBe(`List-Unsubscribe: <${url}>`);
    if (i === 0) {
      // The contact's data is escaped by Mailroom's renderer; SES inserts the rendering as it is.
      expect(html).not.toContain('<b>Eve');
      expect(html).toContain('&lt;b&gt;Eve &amp;');
    } else {
      expect(mail.subject).toBe(`News for Ann${i}`);
      expect(html).toContain(`<p>Hi Ann${i}</p>`);
    }
  }
  // Every message has its own unsubscribe URL.
  const urls = await Promise.all(
    sends.map(async (s) => (await parseMail(s)).headerLines.find((h) => h.key === 'list-unsubscribe')?.line),
  );
  expect(new Set(urls).size).toBe(40);
}, 60_000);

test('SES denies the bulk call (IAM): the campaign goes out one SendEmail per email, and the next one too', async () => {
  const p = await createTestProject(e2e.api.database);
  const to = await seed(p, 'denied', 10, (i) => `Bo${i}`);
  await sesFault({
    match: 'denied.',
    status: 403,
    type: 'AccessDeniedException',
    message: 'not authorized to perform: ses:SendBulkEmail',
    times: 1,
    scope: 'call',
  });
  await sendCampaign(p);
  const first = await sesRecordedTo(to);
  expect(first.filter((s) => s.bulk && s.status === 403)).toHaveLength(10);
  const delivered = first.filter((s) => s.status === 200);
  expect(delivered.map((s) => s.to[0]).sort()).toEqual([...to].sort());
  expect(delivered.every((s) => !s.bulk)).toBe(true);

  const q = await createTestProject(e2e.api.database);
  const next = await seed(q, 'after', 10, (i) => `Cy${i}`);
  await sendCampaign(q);
  const second = await sesRecordedTo(next);
  expect(second.filter((s) => s.status === 200)).toHaveLength(10);
  expect(second.some((s) => s.bulk)).toBe(false);
}, 60_000);
