/**
 * `npm run bench -- ses-bulk`: what SES v2 `SendBulkEmail` would cost the sending process per campaign email, beside
 * the path campaign mail takes (`composeMessage`, then one `SendEmail` with raw content through `SesTransport`, its
 * lean request after the first), against the SES emulator, with no Postgres or Redis.
 *
 * The bulk path holds one SES template per campaign version, made once with `CreateEmailTemplate`. It sends 50
 * entries per call, the most SES takes. Each entry has the recipient, its template data (the contact's name and its
 * own unsubscribe URL, so the email's signed token is still made per email), List-Unsubscribe and
 * List-Unsubscribe-Post as `ReplacementHeaders` (RFC 8058), and the email id as a message tag. Both paths send the
 * same campaigns:
 * - `newsletter`: `bench/compose.ts`'s campaign, about 5 KB of HTML with a greeting and an unsubscribe link per
 *   recipient;
 * - `short`: the worker bench's campaign, one line with the contact's name.
 *
 * A third path keeps Mailroom's renderer: each entry's data is the subject, HTML and text `renderContent` made for
 * that recipient, and one template of the process only inserts them (`{{subject}}`, `{{html}}`, `{{text}}`: SES
 * inserts replacement values as they are, unescaped).
 *
 * CPU µs per email of this process (`process.cpuUsage`) and of the emulator's process (`/proc`), per round, the
 * paths taking turns going first, each on an emptied emulator store. The emulator renders a bulk call's messages
 * itself, where SES would. Its CPU says what moving the build to SES moves off this machine; on AWS it is not the
 * worker's. `BENCH_BULK_EMAILS` sets the emails per
 * round (default 2,000), `BENCH_BULK_ROUNDS` the rounds (3). Sends run 8 at a time (raw) and 2 calls at a time
 * (bulk: 100 emails in flight).
 *
 * @module
 */
import {
  CreateEmailTemplateCommand,
  SendBulkEmailCommand,
  SESv2Client,
  type BulkEmailEntry,
} from '@aws-sdk/client-sesv2';
import { composeMessage } from '@mailroom/sending/compose';
import type { SendingEmail } from '@mailroom/sending/claim';
import { SesTransport } from '@mailroom/sending/ses/transport';
import { createUnsubscribeToken, unsubscribeUrl } from '@mailroom/mail/unsubscribe';
import { renderContent, renderContext } from '@mailroom/mail/templates';
import type { DbOrTx } from '@mailroom/db/client';
import { startSesStack } from '../test/support/services';
import { processCpuMs } from './cpu';
import { email as newsletterEmail, newsletter } from './compose';
import { BENCH_CAMPAIGN } from './campaign-mail';

type Kind = 'newsletter' | 'short';

const PUBLIC_URL = 'https://mail.example.com';
const BULK_ENTRIES = 50;
/** The template that inserts a recipient's subject, HTML and text as rendered by Mailroom. */
const PASSTHROUGH = 'bench-passthrough';

/** The `i`-th campaign email of `kind`, as claimed (the short one greets `contactData.name`). */
function campaignEmail(kind: Kind, i: number): SendingEmail {
  const e = newsletterEmail('campaign', i);
  if (kind === 'newsletter') return e;
  return {
    ...e,
    contactData: { name: `Zoë${i}` },
    campaign: { subject: BENCH_CAMPAIGN.subject, body: BENCH_CAMPAIGN.body, status: 'running' },
  };
}

/** The same campaign as an SES template (SES's own placeholders: no fallback syntax, so no `?? "there"`). */
function sesTemplate(kind: Kind): { Subject: string; Html: string; Text: string } {
  if (kind === 'short')
    return { Subject: BENCH_CAMPAIGN.subject, Html: BENCH_CAMPAIGN.body, Text: 'Hello {{name}}, here is our news.' };
  return {
    Subject: 'Spring news ✓',
    Html: newsletter('Hi {{firstName}},', '<a href="{{unsubscribeUrl}}">Unsubscribe</a>'),
    Text: 'Hi {{firstName}}, our spring collection is here. Unsubscribe: {{unsubscribeUrl}}',
  };
}

/** Runs `work` over `items`, `width` at a time, in order within each lane. */
async function lanes<T>(items: T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/** Runs the bulk-send benchmark and prints its table; returns the rows. */
export async function benchSesBulk(): Promise<Record<string, string | number>[]> {
  const n = Number(process.env.BENCH_BULK_EMAILS ?? 2000);
  const rounds = Number(process.env.BENCH_BULK_ROUNDS ?? 3);
  const ses = await startSesStack();
  const emulatorPid = ses.processes[0].pid!;
  const db = {} as DbOrTx; // composeMessage reads the database only for attachments; campaign mail has none.
  const config = { publicUrl: PUBLIC_URL };
  const transport = new SesTransport({
    sesRegion: 'us-east-1',
    sesEndpoint: ses.emulator,
    awsCredentials: undefined,
    sesConfigurationSet: undefined,
    sesTimeoutMs: 10_000,
  });
  const client = new SESv2Client({
    region: 'us-east-1',
    endpoint: ses.emulator,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
    cacheMiddleware: true,
  });
  let sent = 0;
  const raw = async (e: SendingEmail) => {
    const message = await composeMessage(db, config, e);
    await transport.send({
      raw: message.raw,
      from: e.fromEmail,
      to: [e.toEmail],
      tags: { email_id: e.id },
      stream: 'marketing',
      tracking: false,
    });
    sent++;
  };
  /** The entry data: the campaign's variables for an SES template, or our own rendering passed through. */
  const templateData = (e: SendingEmail, url: string, passthrough: boolean): string => {
    if (!passthrough) return JSON.stringify({ ...e.contactData, unsubscribeUrl: url });
    const context = renderContext({
      contact: { id: e.contactId, email: e.toEmail, data: e.contactData },
      variables: {},
      unsubscribeUrl: url,
    });
    const content = renderContent({ subject: e.campaign!.subject, body: e.campaign!.body, format: 'html' }, context);
    return JSON.stringify(content);
  };
  const bulk = (template: string) => async (chunk: SendingEmail[]) => {
    const passthrough = template === PASSTHROUGH;
    const entries: BulkEmailEntry[] = chunk.map((e) => {
      const url = unsubscribeUrl(PUBLIC_URL, createUnsubscribeToken(e.id, e.signingKey, null));
      return {
        Destination: { ToAddresses: [e.toEmail] },
        ReplacementEmailContent: {
          ReplacementTemplate: { ReplacementTemplateData: templateData(e, url, passthrough) },
        },
        ReplacementHeaders: [
          { Name: 'List-Unsubscribe', Value: `<${url}>` },
          { Name: 'List-Unsubscribe-Post', Value: 'List-Unsubscribe=One-Click' },
        ],
        ReplacementTags: [{ Name: 'email_id', Value: e.id }],
      };
    });
    const out = await client.send(
      new SendBulkEmailCommand({
        FromEmailAddress: chunk[0].fromEmail,
        DefaultContent: { Template: { TemplateName: template, TemplateData: '{}' } },
        BulkEmailEntries: entries,
      }),
    );
    const ok = (out.BulkEmailEntryResults ?? []).filter((r) => r.Status === 'SUCCESS').length;
    if (ok !== chunk.length) throw new Error(`SendBulkEmail: ${ok} of ${chunk.length} entries succeeded`);
    sent += ok;
  };
  const rows: Record<string, string | number>[] = [];
  /**
   * Empties the emulator's store (it keeps every message it was sent, and its GC would grow from round to round),
   * which also drops its templates: `kind`'s and the passthrough one are made again.
   */
  const freshEmulator = async (kind: Kind) => {
    const res = await fetch(`${ses.emulator}/clear-store`, { method: 'POST' });
    if (!res.ok) throw new Error(`clear-store answered ${res.status}`);
    for (const [TemplateName, TemplateContent] of [
      [PASSTHROUGH, { Subject: '{{subject}}', Html: '{{html}}', Text: '{{text}}' }],
      [`bench-${kind}`, sesTemplate(kind)],
    ] as const)
      await client.send(new CreateEmailTemplateCommand({ TemplateName, TemplateContent }));
  };
  try {
    for (const kind of ['newsletter', 'short'] as const) {
      await freshEmulator(kind);
      const batch = (from: number) => Array.from({ length: n }, (_, i) => campaignEmail(kind, from + i));
      const chunks = (emails: SendingEmail[]) =>
        Array.from({ length: Math.ceil(emails.length / BULK_ENTRIES) }, (_, i) =>
          emails.slice(i * BULK_ENTRIES, (i + 1) * BULK_ENTRIES),
        );
      const paths = {
        'SendEmail, raw (today)': (emails: SendingEmail[]) => lanes(emails, 8, raw),
        'SendBulkEmail, SES template': (emails: SendingEmail[]) => lanes(chunks(emails), 2, bulk(`bench-${kind}`)),
        'SendBulkEmail, our rendering passed through': (emails: SendingEmail[]) =>
          lanes(chunks(emails), 2, bulk(PASSTHROUGH)),
      };
      // Warm-up: JIT, the transport's first (SDK-built) request, connections.
      for (const run of Object.values(paths)) await run(batch(0).slice(0, 200));
      const measured: Record<string, { us: number[]; emulatorUs: number[]; perSecond: number[] }> = {};
      for (let r = 0; r < rounds; r++) {
        // The paths take turns going first.
        const order = Object.entries(paths);
        for (let k = 0; k < r % order.length; k++) order.push(order.shift()!);
        for (const [name, run] of order) {
          await freshEmulator(kind);
          const emails = batch((r + 1) * n);
          sent = 0;
          const cpu = process.cpuUsage();
          const emulatorBefore = processCpuMs(emulatorPid);
          const started = performance.now();
          await run(emails);
          const seconds = (performance.now() - started) / 1000;
          const used = process.cpuUsage(cpu);
          if (sent !== n) throw new Error(`${name}: sent ${sent} of ${n}`);
          const m = (measured[name] ??= { us: [], emulatorUs: [], perSecond: [] });
          m.us.push((used.user + used.system) / n);
          m.emulatorUs.push(((processCpuMs(emulatorPid) - emulatorBefore) * 1000) / n);
          m.perSecond.push(n / seconds);
        }
      }
      const span = (xs: number[]) => {
        const sorted = [...xs].sort((a, b) => a - b);
        return `${Math.round(sorted[0])}–${Math.round(sorted[sorted.length - 1])}`;
      };
      for (const [name, m] of Object.entries(measured))
        rows.push({
          campaign: kind,
          path: name,
          'this process µs/email': span(m.us),
          'emulator µs/email': span(m.emulatorUs),
          'emails/s': span(m.perSecond),
        });
    }
  } finally {
    transport.close();
    client.destroy();
    ses.stop();
  }
  console.log(`\nSES bulk (${n} emails a round, ${rounds} rounds; CPU per email; ranges over the rounds)`);
  console.table(rows);
  return rows;
}
