/**
 * Double opt-in confirmations (docs/guides/topics.md, double opt-in): made by `POST /contacts` with
 * `doubleOptIn: true`, confirmed through the signed link of the confirmation email, expired by the worker's pass.
 *
 * @module
 */
import { and, desc, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { contactConfirmations } from '@mailroom/db/schema/topics';

export type ConfirmationRow = typeof contactConfirmations.$inferSelect;

/** Records a pending confirmation. */
export async function createConfirmation(
  db: DbOrTx,
  row: {
    id: string;
    projectId: string;
    contactId: string;
    topicIds: string[];
    createdContact: boolean;
    emailId: string;
  },
): Promise<ConfirmationRow> {
  const [created] = await db.insert(contactConfirmations).values(row).returning();
  return created;
}

/**
 * Adds the topics a double opt-in will confirm to the contact as unsubscribed, in one statement; a topic the
 * contact already has a choice for keeps it (`on conflict do nothing`).
 */
export async function holdTopicsForConfirmation(
  db: DbOrTx,
  projectId: string,
  contactId: string,
  topicIds: readonly string[],
): Promise<void> {
  await db.execute(sql`
    insert into contact_topics (contact_id, topic_id, project_id, subscribed)
    select ${contactId}::uuid, t, ${projectId}::uuid, false from unnest(${sql.param(topicIds)}::uuid[]) as t
    on conflict do nothing`);
}

/** A confirmation with its contact's address and the key that verifies its token. */
export interface ConfirmationTarget extends ConfirmationRow {
  email: string;
  signingKey: Buffer;
}

/** Loads the confirmation a token names (any project: the token's MAC decides), or `undefined`. */
export async function confirmationTarget(db: DbOrTx, id: string): Promise<ConfirmationTarget | undefined> {
  const rows = await db
    .select({ c: contactConfirmations, email: sql<string>`k.email`, signingKey: sql<Buffer>`p.signing_key` })
    .from(contactConfirmations)
    .innerJoin(sql`contacts k`, sql`k.id = ${contactConfirmations.contactId}`)
    .innerJoin(sql`projects p`, sql`p.id = ${contactConfirmations.projectId}`)
    .where(eq(contactConfirmations.id, id));
  const r = rows[0];
  return r && { ...r.c, email: r.email, signingKey: r.signingKey };
}

/**
 * Marks a pending confirmation confirmed with its proof (time, IP address, user agent), once.
 *
 * @returns the confirmed row, or `undefined` when it was already confirmed or has expired.
 */
export async function markConfirmed(
  db: DbOrTx,
  id: string,
  proof: { ip: string | null; userAgent: string | null },
): Promise<ConfirmationRow | undefined> {
  const [row] = await db
    .update(contactConfirmations)
    .set({ confirmedAt: new Date(), ip: proof.ip, userAgent: proof.userAgent })
    .where(
      and(
        eq(contactConfirmations.id, id),
        sql`${contactConfirmations.confirmedAt} is null and ${contactConfirmations.expiredAt} is null`,
      ),
    )
    .returning();
  return row;
}

/** A contact's confirmations, newest first (at most 20): the proof of consent `GET /contacts/{id}` shows. */
export async function confirmationsOf(db: DbOrTx, projectId: string, contactId: string): Promise<ConfirmationRow[]> {
  return db
    .select()
    .from(contactConfirmations)
    .where(and(eq(contactConfirmations.projectId, projectId), eq(contactConfirmations.contactId, contactId)))
    .orderBy(desc(contactConfirmations.id))
    .limit(20);
}

/**
 * Marks up to `limit` confirmations pending for longer than `olderThanHours` expired, oldest first (rows another
 * pass holds are skipped).
 *
 * @returns the expired confirmations' projects and contacts, and whether the double opt-in created the contact
 *   and the contact is still unconfirmed and globally unsubscribed (then the caller erases it).
 */
export async function expirePendingConfirmations(
  db: DbOrTx,
  olderThanHours: number,
  limit: number,
): Promise<{ projectId: string; contactId: string; erase: boolean }[]> {
  const rows = await db.execute<{ project_id: string; contact_id: string; erase: boolean }>(sql`
    with due as (
      select id from contact_confirmations
      where confirmed_at is null and expired_at is null and created_at < now() - make_interval(hours => ${olderThanHours})
      order by created_at limit ${limit} for update skip locked
    ),
    marked as (
      update contact_confirmations c set expired_at = now() from due where c.id = due.id
      returning c.project_id, c.contact_id, c.created_contact
    )
    select m.project_id, m.contact_id,
      (m.created_contact and not k.subscribed
        and not exists (select 1 from contact_confirmations o where o.contact_id = m.contact_id and o.confirmed_at is not null)) as erase
    from marked m join contacts k on k.id = m.contact_id
  `);
  return rows.rows.map((r) => ({ projectId: r.project_id, contactId: r.contact_id, erase: r.erase }));
}

/** The project's key for signed links (unsubscribe and confirmation tokens), or `undefined` for an unknown project. */
export async function projectSigningKey(db: DbOrTx, projectId: string): Promise<Buffer | undefined> {
  const rows = await db.execute<{ signing_key: Buffer }>(
    sql`select signing_key from projects where id = ${projectId}::uuid`,
  );
  return rows.rows[0]?.signing_key;
}

/**
 * Applies a confirmed double opt-in's global part in one statement: the contact becomes subscribed (recording
 * `contact.subscribed` with `method: "confirmation"` when that changed it) and `contact.confirmed` is recorded with
 * the proof (`data`). Workflow triggers read both events.
 */
export async function applyConfirmation(
  db: DbOrTx,
  c: Pick<ConfirmationRow, 'projectId' | 'contactId'>,
  data: Record<string, unknown>,
  test: boolean,
): Promise<void> {
  await db.execute(sql`
    with changed as (
      update contacts set subscribed = true, updated_at = now()
      where id = ${c.contactId}::uuid and project_id = ${c.projectId}::uuid and not subscribed
      returning id
    ),
    subscribed_event as (
      insert into events (id, project_id, contact_id, name, data, created_at, test)
      select mailroom_uuid_v7(clock_timestamp()), ${c.projectId}::uuid, id, 'contact.subscribed', '{"method":"confirmation"}'::jsonb, clock_timestamp(), ${test}::boolean from changed
    )
    insert into events (id, project_id, contact_id, name, data, created_at, test)
    select mailroom_uuid_v7(clock_timestamp()), ${c.projectId}::uuid, k.id, 'contact.confirmed', ${JSON.stringify(data)}::jsonb, clock_timestamp(), ${test}::boolean
    from contacts k where k.id = ${c.contactId}::uuid and k.project_id = ${c.projectId}::uuid
  `);
}
