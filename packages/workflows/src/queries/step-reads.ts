/**
 * What the workflow engine's steps read, never write: the event a WAIT_FOR_EVENT waits for, whether the contact
 * matches a CONDITION's filter, and the contact of a SEND_EMAIL with the suppression rule's answer.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import { type SegmentFilter } from '@mailroom/audiences/segments';
import type { DbOrTx } from '@mailroom/db/client';
import { compileAudience } from '@mailroom/audiences/audience';
import { suppressionCauseSql, type SuppressionCause } from '@mailroom/db/queries/suppression-rule';
import { topicSubscribedSql } from '@mailroom/contacts/queries/topics';
import type { ExecutionRow } from './workflows';

/** A recorded event, as the engine hands it to an execution's context. */
export interface WaitedEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/**
 * The first event the WAITING execution waits for that was recorded at or after its wait began (and, with
 * `until`, no later than that), of the execution's mode (`test`). Closes the race of an event committed while the
 * wait itself was committing.
 */
export async function eventForWait(db: DbOrTx, x: ExecutionRow, until?: Date): Promise<WaitedEvent | undefined> {
  if (!x.waitEvent || !x.waitSince) return undefined;
  const rows = await db.execute<{
    id: string;
    name: string;
    data: Record<string, unknown>;
    created_at: string | Date;
  }>(sql`
    select id, name, data, created_at from events
    where project_id = ${x.projectId}::uuid and contact_id = ${x.contactId}::uuid and name = ${x.waitEvent}
      and test = ${x.test}::boolean and created_at >= ${x.waitSince.toISOString()}::timestamptz
      ${until ? sql`and created_at <= ${until.toISOString()}::timestamptz` : sql``}
    order by created_at, id limit 1
  `);
  const r = rows.rows[0];
  return r && { id: r.id, name: r.name, data: r.data, createdAt: new Date(r.created_at) };
}

/** The context entry of a received event. */
export function eventContext(e: WaitedEvent): Record<string, unknown> {
  return { name: e.name, eventId: e.id, data: e.data, at: e.createdAt.toISOString() };
}

/**
 * Evaluates a CONDITION: does the contact match `filter` now, with `context.<path>` read from the execution's
 * context? Same compiler, hence same semantics, as segments.
 */
export async function conditionMatches(db: DbOrTx, x: ExecutionRow, filter: SegmentFilter): Promise<boolean> {
  const predicate = compileAudience(
    x.projectId,
    { type: 'FILTERED', filter },
    { now: Date.now(), alias: 'c', context: x.context },
  );
  const rows = await db.execute<{ ok: boolean }>(sql`
    select exists (select 1 from contacts c where c.project_id = ${x.projectId}::uuid and c.id = ${x.contactId}::uuid and ${predicate}) as ok
  `);
  return rows.rows[0].ok;
}

/** What SEND_EMAIL needs of the contact now. */
export type ContactForSend = {
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  /** Why an email of the step's template to this contact must not be sent (the suppression rule), or `null`. */
  suppression: SuppressionCause | null;
};

/**
 * The execution's contact with the suppression rule's answer for an email of template `templateId` (marketing
 * when the template is MARKETING), or `undefined` when the contact was deleted.
 */
export async function contactForSend(
  db: DbOrTx,
  x: ExecutionRow,
  templateId: string,
  topicId?: string,
): Promise<ContactForSend | undefined> {
  const marketing = sql`coalesce((select t.type = 'MARKETING' from templates t where t.id = ${templateId}::uuid and t.project_id = c.project_id), false)`;
  const topicSubscribed = topicId ? topicSubscribedSql(sql`c.project_id`, sql`c.id`, sql`${topicId}::uuid`) : undefined;
  const rows = await db.execute<ContactForSend>(sql`
    select c.email, c.subscribed, c.data,
      ${suppressionCauseSql({ projectId: sql`c.project_id`, emailKey: sql`c.email_key`, marketing, subscribed: sql`c.subscribed`, ...(topicSubscribed ? { topicSubscribed } : {}) })} as suppression
    from contacts c where c.project_id = ${x.projectId}::uuid and c.id = ${x.contactId}::uuid
  `);
  return rows.rows[0];
}
