/**
 * Transactional mail sharing `SendBulkEmail` calls end to end (API → Postgres → one send job per email at 400/s →
 * worker → SES emulator behind the recording proxy, decision 0179): each recipient gets exactly one message, with
 * its own rendering and tags, whether it went in a shared call or on its own; a call carries at most 50 ms of
 * sending at the rate (20 here); a message that went on its own keeps Mailroom's `Message-ID`; an attachment's
 * email never shares a call; a rejected entry fails that email alone.
 */
import { inArray } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import {
  client,
  createTestProject,
  parseMail,
  recipient,
  sentEmailId,
  sesFault,
  sesRecordedTo,
  waitFor,
} from '../support/harness';
import { useE2e } from '../support/e2e';
import { toSummary } from '../support/summary';

const e2e = useE2e({ env: { SES_MAX_SEND_RATE: '400' } });

/** Waits until every email of `ids` left `queued`/`sending`; returns the rows. */
async function settled(ids: string[]) {
  return waitFor(
    async () => {
      const rows = await e2e.api.database.db
        .select({ id: emails.id, status: emails.status, messageId: emails.messageId, error: emails.error })
        .from(emails)
        .where(inArray(emails.id, ids));
      return rows.length === ids.length && rows.every((r) => r.status !== 'queued' && r.status !== 'sending')
        ? rows
        : undefined;
    },
    45_000,
    'every email settled',
  );
}

test('jobs from one sender share calls of at most 20; every recipient gets one message, its own', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const to = Array.from({ length: 80 }, () => recipient('shared'));
  // One request per recipient, as an application sends receipts: each email is its own job.
  const accepted = await Promise.all(
    to.map((address, i) =>
      as.post('/v1/send', {
        to: address,
        from: `receipts@${p.domain}`,
        subject: 'Receipt {{n}}',
        body: '<p>Order {{n}}</p>',
        data: { n: `R${i}` },
      }),
    ),
  );
  expect(accepted.map((r) => r.status)).toEqual(to.map(() => 202));
  const ids: string[] = accepted.map((r) => r.body.data.emails[0].email);
  const rows = await settled(ids);
  expect(rows.every((r) => r.status === 'sent')).toBe(true);

  const sends = (await sesRecordedTo(to)).filter((s) => s.status === 200);
  expect(sends).toHaveLength(80);
  const byId = new Map<string, (typeof sends)[number]>();
  for (const send of sends) byId.set(await sentEmailId(send), send);
  expect([...byId.keys()].sort()).toEqual([...ids].sort());
  const bulk = sends.filter((s) => s.bulk);
  toSummary(`80 one-email jobs at 400/s: ${bulk.length} sent in shared calls, ${80 - bulk.length} on their own`);
  // 80 jobs through 8 slots whose claims come back in batches: some shared a call.
  expect(bulk.length).toBeGreaterThan(1);
  // A call is one arrival at the recorder: no more than 20 entries (50 ms at 400/s).
  const perCall = new Map<number, number>();
  for (const s of bulk) perCall.set(s.at, (perCall.get(s.at) ?? 0) + 1);
  expect(Math.max(...perCall.values())).toBeLessThanOrEqual(20);
  for (const [i, id] of ids.entries()) {
    const send = byId.get(id)!;
    const mail = await parseMail(send);
    expect(send.to).toEqual([to[i]]);
    expect(mail.subject).toBe(`Receipt R${i}`);
    expect(mail.html).toContain(`<p>Order R${i}</p>`);
    expect(send.tags).toEqual(expect.arrayContaining([{ Name: 'project_id', Value: p.id }]));
    if (!send.bulk) expect(mail.messageId).toBe(`<${id}@${p.domain}>`);
    // The row records the message id SES answered for this very message.
    expect(rows.find((r) => r.id === id)!.messageId).toBe(send.messageId);
  }
}, 60_000);

test('an attachment never shares a call; a rejected entry fails its email alone', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const to = Array.from({ length: 30 }, (_, i) => recipient(i === 3 ? 'refusedentry' : 'mixed'));
  await sesFault({
    match: 'refusedentry',
    status: 400,
    type: 'MessageRejected',
    message: 'Email address is not verified.',
    times: 1,
  });
  const accepted = await Promise.all(
    to.map((address, i) =>
      as.post('/v1/send', {
        to: address,
        from: `receipts@${p.domain}`,
        subject: 'Invoice',
        body: '<p>Attached</p>',
        ...(i === 5 ? { attachments: [{ filename: 'a.txt', content: Buffer.from('hello').toString('base64') }] } : {}),
      }),
    ),
  );
  expect(accepted.map((r) => r.status)).toEqual(to.map(() => 202));
  const ids: string[] = accepted.map((r) => r.body.data.emails[0].email);
  const rows = await settled(ids);
  const rowOf = (i: number) => rows.find((r) => r.id === ids[i])!;
  expect(ids.map((_, i) => rowOf(i).status)).toEqual(ids.map((_, i) => (i === 3 ? 'failed' : 'sent')));
  expect(rowOf(3).error).toMatch(/MessageRejected|not verified/);
  const delivered = (await sesRecordedTo(to)).filter((s) => s.status === 200);
  expect(delivered).toHaveLength(29);
  const attached = delivered.find((s) => s.to[0] === to[5])!;
  expect(attached.bulk).toBeFalsy();
  expect((await parseMail(attached)).attachments.map((a) => a.filename)).toEqual(['a.txt']);
}, 60_000);
