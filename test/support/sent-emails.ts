/**
 * Emails recorded as handed to SES the way the worker records them (claim, then `finishEmail` with an SES message
 * id), so `reputation_counts` counts them as sent, without a worker or SES: for API tests that then post SES
 * events through `/webhooks/ses`.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { claimEmail, finishEmail } from '@mailroom/sending/queries/email-batches';
import { type Db } from '@mailroom/db/client';
import { recipient } from './harness';

/** A sent email as an SES event names it. */
export interface SentEmail {
  id: string;
  to: string;
  messageId: string;
}

/** Claims a queued email and finishes it `sent` with a fresh SES message id. @returns that message id. */
export async function markSent(db: Db, emailId: string): Promise<string> {
  const token = randomUUID();
  const claimed = await claimEmail(db, emailId, token, 60_000);
  if (!claimed.ok) throw new Error(`email ${emailId} not claimable: ${claimed.kind}`);
  const messageId = `0100018f${randomUUID().replace(/-/g, '')}-000000`;
  const done = await finishEmail(db, emailId, token, { status: 'sent', messageId, renderedSubject: 'S' });
  if (!done.finished) throw new Error(`email ${emailId} not finished`);
  return messageId;
}

/**
 * Inserts `n` queued emails of a campaign (as its fan-out would, without contacts) from `from`, and records each
 * as sent. @returns them in order.
 */
export async function sentCampaignEmails(
  db: Db,
  p: { projectId: string; campaignId: string; from: string },
  n: number,
): Promise<SentEmail[]> {
  const to = Array.from({ length: n }, () => recipient('rep'));
  const rows = await db.execute<{ id: string; to_email: string }>(sql`
    insert into emails (id, project_id, campaign_id, marketing, source, to_email, from_email, subject, status)
    select gen_random_uuid(), ${p.projectId}::uuid, ${p.campaignId}::uuid, true, 'campaign', t.address, ${p.from}, 'S', 'queued'
    from unnest(${sql.param(to)}::text[]) with ordinality as t(address, n)
    order by t.n
    returning id, to_email
  `);
  const byTo = new Map(rows.rows.map((r) => [r.to_email, r.id]));
  const sent: SentEmail[] = [];
  for (const address of to) {
    const id = byTo.get(address)!;
    sent.push({ id, to: address, messageId: await markSent(db, id) });
  }
  return sent;
}
