/**
 * Received messages (`inbound_emails`): where one belongs (the project of an inbound-enabled recipient domain),
 * what it links to (the sender's contact, the email of ours it answers), its row, its `email.received` contact
 * event, and the reads of `GET /inbound`. Every read and write is scoped by project.
 *
 * @module
 */
import { and, desc, eq, getTableColumns, sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import {
  domains,
  inboundEmails,
  type InboundAttachmentInfo,
  type InboundStatus,
  type InboundVerdicts,
} from '@mailroom/db/schema';

export type InboundEmailRow = typeof inboundEmails.$inferSelect;

/**
 * The projects receiving mail for `names` (lower-case domain names): inbound-enabled, verified domains, each
 * matched exactly. A pending domain receives nothing: whoever added it has not shown they own it (a pending
 * subdomain of another tenant's domain must not take that tenant's mail).
 *
 * @returns domain name → project id, for the names that have one.
 */
export async function inboundDomainOwners(db: DbOrTx, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db
    .select({ domain: domains.domain, projectId: domains.projectId })
    .from(domains)
    .where(
      and(
        eq(domains.inboundEnabled, true),
        eq(domains.verified, true),
        sql`lower(${domains.domain}) = any(${sql.param([...names])}::text[])`,
      ),
    );
  return new Map(rows.map((r) => [r.domain.toLowerCase(), r.projectId]));
}

/** The project's contact with this email key (lower-cased address), if any. */
export async function contactIdByEmailKey(
  db: DbOrTx,
  projectId: string,
  emailKey: string,
): Promise<string | undefined> {
  const r = await db.execute<{ id: string }>(
    sql`select id from contacts where project_id = ${projectId}::uuid and email_key = ${emailKey} limit 1`,
  );
  return r.rows[0]?.id;
}

/**
 * The project's email that one of `references` names: our own Message-IDs are `<email id>@<sender domain>`
 * (`composeMessage`), and SES's are `<SES message id>@<region>.amazonses.com` (its `emails.message_id`).
 *
 * @param references - Message-IDs without brackets, most relevant first (In-Reply-To, then References last to first).
 * @returns the first one that is an email of the project.
 */
export async function repliedEmailId(
  db: DbOrTx,
  projectId: string,
  references: readonly string[],
): Promise<string | undefined> {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  for (const ref of references.slice(0, 20)) {
    const local = ref.slice(0, ref.lastIndexOf('@'));
    const host = ref.slice(ref.lastIndexOf('@') + 1).toLowerCase();
    const r = UUID.test(local)
      ? await db.execute<{ id: string }>(
          sql`select id from emails where project_id = ${projectId}::uuid and id = ${local.toLowerCase()}::uuid limit 1`,
        )
      : host.endsWith('amazonses.com') && local
        ? await db.execute<{ id: string }>(
            sql`select id from emails where project_id = ${projectId}::uuid and message_id = ${local} limit 1`,
          )
        : undefined;
    if (r?.rows[0]) return r.rows[0].id;
  }
  return undefined;
}

/** A received message to store (see {@link inboundEmails} for each field). */
export interface NewInboundEmail {
  projectId: string;
  sesMessageId: string;
  status: InboundStatus;
  error?: string | null;
  messageId?: string | null;
  fromEmail?: string | null;
  fromName?: string | null;
  to?: string[];
  cc?: string[];
  recipients: string[];
  subject?: string | null;
  text?: string | null;
  html?: string | null;
  headers?: { name: string; value: string }[];
  attachments?: InboundAttachmentInfo[];
  raw?: Buffer | null;
  size?: number | null;
  verdicts: InboundVerdicts;
  contactId?: string | null;
  inReplyToEmailId?: string | null;
  receivedAt: Date;
}

/**
 * Stores a received message, once per (project, SES message id).
 *
 * @returns the new row's id, or `undefined` when the message was stored before (an SNS redelivery).
 */
export async function insertInboundEmail(db: DbOrTx, row: NewInboundEmail): Promise<string | undefined> {
  const [inserted] = await db
    .insert(inboundEmails)
    .values(row)
    .onConflictDoNothing({ target: [inboundEmails.projectId, inboundEmails.sesMessageId] })
    .returning({ id: inboundEmails.id });
  return inserted?.id;
}

/**
 * Records the `email.received` event on the sender's contact (what starts and wakes workflows triggered by it: the
 * workflow inbox trigger of `events`), dated when SES received the message.
 */
export async function recordReceivedEvent(
  db: DbOrTx,
  projectId: string,
  contactId: string,
  data: Record<string, unknown>,
  at: Date,
): Promise<void> {
  await db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    values (mailroom_uuid_v7(${at.toISOString()}::timestamptz), ${projectId}::uuid, ${contactId}::uuid, 'email.received', ${JSON.stringify(data)}::jsonb, ${at.toISOString()}::timestamptz)`);
}

const { raw: _raw, ...listColumns } = getTableColumns(inboundEmails);

/** A received message without its raw bytes (what lists and `GET /inbound/{id}` show). */
export type InboundEmailSummary = Omit<InboundEmailRow, 'raw'>;

/** One keyset page of the project's received messages, newest first. */
export async function listInboundEmails(
  db: DbOrTx,
  projectId: string,
  q: { limit: number; beforeId?: string },
): Promise<{ items: InboundEmailSummary[]; hasMore: boolean; total: number }> {
  const scope = eq(inboundEmails.projectId, projectId);
  const page = await db
    .select(listColumns)
    .from(inboundEmails)
    .where(and(scope, q.beforeId ? sql`${inboundEmails.id} < ${q.beforeId}::uuid` : undefined))
    .orderBy(desc(inboundEmails.id))
    .limit(q.limit + 1);
  const [count] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(inboundEmails)
    .where(scope);
  return { items: page.slice(0, q.limit), hasMore: page.length > q.limit, total: count?.n ?? 0 };
}

/** One received message of the project (without its raw bytes), or `undefined`. */
export async function getInboundEmail(
  db: DbOrTx,
  projectId: string,
  id: string,
): Promise<InboundEmailSummary | undefined> {
  const [row] = await db
    .select(listColumns)
    .from(inboundEmails)
    .where(and(eq(inboundEmails.projectId, projectId), eq(inboundEmails.id, id)));
  return row;
}

/** The raw bytes of one received message of the project: `undefined` for no such message, `null` when none are kept. */
export async function getInboundRaw(db: DbOrTx, projectId: string, id: string): Promise<Buffer | null | undefined> {
  const [row] = await db
    .select({ raw: inboundEmails.raw })
    .from(inboundEmails)
    .where(and(eq(inboundEmails.projectId, projectId), eq(inboundEmails.id, id)));
  return row ? row.raw : undefined;
}
