/**
 * Compose micro-benchmark (`npm run bench -- compose`): the worker's `composeMessage` (render, headers, MIME) per
 * email, in one process and without services, with the MIME builder of today (`buildMime`: the synchronous writer
 * and its part cache) beside the reference (`buildMimeStreamed`: nodemailer's streamed build), in alternating
 * rounds. Prints µs of CPU per email and bytes allocated per email (heap and buffers, from batches no GC ran in),
 * for campaign-like and transactional emails, and the ratios; then the MIME build alone (µs of CPU per message) on
 * the messages composeMessage handed to it. BENCH_COMPOSE_EMAILS sets the emails per round
 * (default 1500), BENCH_COMPOSE_ROUNDS the rounds (default 3).
 *
 * Cases: `campaign` (a newsletter body that greets the contact by name and links its unsubscribe URL: HTML and text
 * differ per recipient), `campaign-shared` (the same newsletter without per-recipient text in the body: only the
 * headers differ), `transactional` (a short receipt with a custom header), `transactional+pdf` (with a 40 KB
 * attachment; a campaign-free path that still loads no database: the attachment is passed in).
 */
import { randomBytes } from 'node:crypto';
import { GCProfiler } from 'node:v8';
import { buildMime, buildMimeStreamed, type MimeMessage } from '@mailroom/mail/mail';
import { clearPartCache, partCacheStats } from '@mailroom/mail/mime-build';
import { composeMessage } from '@mailroom/sending/compose';
import type { SendingEmail } from '@mailroom/sending/claim';
import type { DbOrTx } from '@mailroom/db/client';

const para = (i: number) =>
  `<tr><td style="padding:12px 24px;font-family:Helvetica,Arial,sans-serif;font-size:15px;line-height:22px;color:#333333">` +
  `Paragraph ${i}: our spring collection is here — fresh picks, déjà vu prices and a few surprises. Read more about ` +
  `<a href="https://shop.example.com/p/${i}?utm_source=newsletter&amp;utm_medium=email">item ${i}</a>.</td></tr>\n`;
/** The newsletter body (about 5 KB of HTML) with `greeting` at its top and `footer` at its end. */
export const newsletter = (greeting: string, footer: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>News</title></head><body><table width="100%">\n` +
  `<tr><td>${greeting}</td></tr>\n${Array.from({ length: 20 }, (_, i) => para(i)).join('')}` +
  `<tr><td>${footer}</td></tr></table></body></html>`;

const CAMPAIGN_BODY = newsletter('Hi {{firstName ?? "there"}},', '<a href="{{unsubscribeUrl}}">Unsubscribe</a>');
const SHARED_BODY = newsletter('Hi there,', 'You receive this as a customer of Shop Ünited.');
const KEY = randomBytes(32);
const PDF = randomBytes(40_000);

/** The bench's kinds of email. */
export type Case = 'campaign' | 'campaign-shared' | 'transactional' | 'transactional+pdf';

/**
 * The `i`-th claimed email of kind `kind`, as the worker hands it to `composeMessage` (`campaign`: the newsletter
 * that greets `contactData.firstName` and links its unsubscribe URL; also used by `bench/ses-bulk.ts`).
 */
export function email(kind: Case, i: number): SendingEmail {
  const campaign = kind.startsWith('campaign');
  const id = `01900000-0000-7000-8000-${String(i).padStart(12, '0')}`;
  return {
    id,
    projectId: 'p',
    contactId: `c${i}`,
    toEmail: `user${i}@example.org`,
    toName: i % 2 ? `Ann Lee ${i}` : null,
    fromEmail: 'news@shop.example.com',
    fromName: 'Shop Ünited',
    replyTo: null,
    contactData: { firstName: `Zoë${i}` },
    variables: campaign ? {} : { order: 1000 + i },
    signingKey: KEY,
    marketing: campaign,
    topicId: null,
    headers: campaign ? {} : { 'X-Ref': `ref-${i}` },
    attachmentIds: kind === 'transactional+pdf' ? ['a'] : [],
    campaign: campaign
      ? { subject: 'Spring news ✓', body: kind === 'campaign' ? CAMPAIGN_BODY : SHARED_BODY, status: 'running' }
      : null,
    subject: campaign ? null : 'Your receipt #{{order}}',
    body: campaign ? null : '<p>Hi {{firstName}}, thanks for order {{order}}.</p><p>Total: 12.00 €</p>',
    bodyFormat: campaign ? null : 'html',
  } as unknown as SendingEmail;
}

/** A stand-in for the database: only `loadAttachments` reads it, for `transactional+pdf`. */
const db = {
  select: () => ({
    from: () => ({
      where: () =>
        Promise.resolve([{ id: 'a', filename: 'invoice.pdf', content: PDF, contentType: 'application/pdf' }]),
    }),
  }),
} as unknown as DbOrTx;

const config = { publicUrl: 'https://mail.example.com' };

async function round(kind: Case, build: (m: MimeMessage) => Promise<Buffer>, n: number, from: number) {
  const cpu = process.cpuUsage();
  const allocations: number[] = [];
  const BATCH = 20;
  for (let i = 0; i < n; i += BATCH) {
    const profiler = new GCProfiler();
    profiler.start();
    const before = process.memoryUsage();
    for (let j = i; j < i + BATCH; j++) await composeMessage(db, config, email(kind, from + j), undefined, build);
    const after = process.memoryUsage();
    // Only a batch no GC ran in says what it allocated.
    if (profiler.stop().statistics.length === 0)
      allocations.push((after.heapUsed - before.heapUsed + after.arrayBuffers - before.arrayBuffers) / BATCH);
  }
  const used = process.cpuUsage(cpu);
  allocations.sort((a, b) => a - b);
  return {
    us: (used.user + used.system) / n,
    bytes: allocations.length ? allocations[Math.floor(allocations.length / 2)] : NaN,
  };
}

/** Runs the compose benchmark and prints its table; returns the rows. */
export async function benchCompose(): Promise<Record<string, string | number>[]> {
  const n = Number(process.env.BENCH_COMPOSE_EMAILS ?? 1500);
  const rounds = Number(process.env.BENCH_COMPOSE_ROUNDS ?? 3);
  const rows: Record<string, string | number>[] = [];
  const cases: Case[] = ['campaign', 'campaign-shared', 'transactional', 'transactional+pdf'];
  for (const kind of cases) {
    clearPartCache();
    // Warm-up: compiled templates, JIT.
    await round(kind, buildMimeStreamed, 200, 0);
    await round(kind, buildMime, 200, 0);
    const sums = {
      reference: { us: [] as number[], bytes: [] as number[] },
      sync: { us: [] as number[], bytes: [] as number[] },
    };
    for (let r = 0; r < rounds; r++) {
      for (const [name, build] of [
        ['reference', buildMimeStreamed],
        ['sync', buildMime],
      ] as const) {
        const res = await round(kind, build, n, (r + 1) * n);
        sums[name].us.push(res.us);
        sums[name].bytes.push(res.bytes);
      }
    }
    // The MIME build alone, on the messages composeMessage handed to it (captured from one pass).
    const captured: MimeMessage[] = [];
    for (let i = 0; i < Math.min(n, 500); i++)
      await composeMessage(db, config, email(kind, i), undefined, (m) => (captured.push(m), buildMime(m)));
    const mimeOnly = { reference: [] as number[], sync: [] as number[] };
    for (let r = 0; r < rounds; r++)
      for (const [name, build] of [
        ['reference', buildMimeStreamed],
        ['sync', buildMime],
      ] as const) {
        const cpu = process.cpuUsage();
        for (const m of captured) await build(m);
        const used = process.cpuUsage(cpu);
        mimeOnly[name].push((used.user + used.system) / captured.length);
      }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const ref = { us: median(sums.reference.us), kb: median(sums.reference.bytes) / 1024 };
    const now = { us: median(sums.sync.us), kb: median(sums.sync.bytes) / 1024 };
    const cache = partCacheStats();
    rows.push({
      case: kind,
      'reference µs/email': Math.round(ref.us),
      'new µs/email': Math.round(now.us),
      'CPU ratio': (now.us / ref.us).toFixed(2),
      'reference KB alloc/email': ref.kb.toFixed(0),
      'new KB alloc/email': now.kb.toFixed(0),
      'MIME only: reference µs': Math.round(median(mimeOnly.reference)),
      'MIME only: new µs': Math.round(median(mimeOnly.sync)),
      'part cache hits': `${cache.hits}/${cache.hits + cache.misses}`,
    });
  }
  console.log('\nCompose (composeMessage: render + headers + MIME), CPU per email; ratios only within this run');
  console.table(rows);
  return rows;
}
