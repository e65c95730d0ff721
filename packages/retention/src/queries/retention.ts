/**
 * Retention: the statements of the worker's `retention` pass, one batch each, and the per-project
 * overrides (`projects.retention`).
 *
 * Every batch statement finds at most `limit` rows of one project older than a cutoff through an index made for its
 * predicate (migration `0016_retention`), oldest first, locks them `skip locked` (so a row another transaction holds
 * is left for the next batch, and no batch waits), and changes them through the primary key
 * (`= any(array(…))`, not `in (…)`, which the planner may turn into a hash join over the whole table). Each
 * statement is its own transaction: locks are held for one batch only.
 *
 * Derived data follows in the same statement: `event_names` counts by the statement triggers on `events`
 * (`0002_contact_counters`), timelines (`email_events`), webhook attempts and step runs by their cascades.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { getProjectOverrides, updateProjectOverrides } from '@mailroom/projects/queries/project-overrides';
import type { ProjectRetention } from '@mailroom/db/schema';

/** The kinds of record a retention setting covers, in the order a pass works them. */
export const RETENTION_KINDS = [
  'emailContent',
  'attachments',
  'emails',
  'events',
  'webhookDeliveries',
  'workflowExecutions',
  'inbound',
] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];

/** Statuses of an email not yet final: its content is needed to send it, so it never expires. */
const NOT_FINAL = sql`('scheduled', 'queued', 'sending')`;

/**
 * One batch of one kind for one project: records older than `days` days (UTC now minus days), oldest first.
 *
 * - `emailContent`: final emails (not `scheduled`/`queued`/`sending`) keep their metadata and timeline; `body`, `variables`,
 *   `headers` and `attachment_ids` are cleared and `content_expired_at` set.
 * - `attachments`: attachment rows older than the content window no pending email refers to.
 * - `emails`: final non-campaign emails, deleted with their timeline (a campaign's emails stay while the campaign
 *   does: its stats are counted from them).
 * - `events`: contact events (`event_names` counts follow by trigger).
 * - `webhookDeliveries`: finished (`succeeded`/`failed`) deliveries with their attempts.
 * - `workflowExecutions`: finished executions (by `finished_at`) with their step runs.
 * - `inbound`: received messages (by `received_at`), with their raw bytes.
 *
 * @param days - the retention of that kind (days, at least 1).
 * @param limit - rows per statement.
 * @returns rows changed or deleted (fewer than `limit`: nothing older is left that was not locked).
 */
export async function retentionBatch(
  db: DbOrTx,
  kind: RetentionKind,
  projectId: string,
  days: number,
  limit: number,
): Promise<number> {
  const p = sql`${projectId}::uuid`;
  const cutoff = sql`now() - make_interval(days => ${days}::int)`;
  let statement;
  switch (kind) {
    case 'emailContent':
      statement = sql`
        update emails set body = null, variables = '{}'::jsonb, headers = '{}'::jsonb, attachment_ids = '{}'::uuid[],
          content_expired_at = now(), updated_at = now()
        where id = any(array(
          select id from emails
          where project_id = ${p} and content_expired_at is null and created_at < ${cutoff} and status not in ${NOT_FINAL}
          order by created_at limit ${limit} for update skip locked))`;
      break;
    case 'attachments':
      // The pending emails are few (emails_pending_idx); an attachment one of them still needs stays.
      statement = sql`
        delete from attachments where id = any(array(
          select a.id from attachments a
          where a.project_id = ${p} and a.created_at < ${cutoff}
            and not exists (select 1 from emails e where e.status in ${NOT_FINAL} and a.id = any(e.attachment_ids))
          order by a.created_at limit ${limit} for update skip locked))`;
      break;
    case 'emails':
      statement = sql`
        delete from emails where id = any(array(
          select id from emails
          where project_id = ${p} and campaign_id is null and created_at < ${cutoff} and status not in ${NOT_FINAL}
          order by created_at limit ${limit} for update skip locked))`;
      break;
    case 'events':
      statement = sql`
        delete from events where id = any(array(
          select id from events where project_id = ${p} and created_at < ${cutoff}
          order by created_at limit ${limit} for update skip locked))`;
      break;
    case 'webhookDeliveries':
      statement = sql`
        delete from webhook_deliveries where id = any(array(
          select id from webhook_deliveries where project_id = ${p} and status <> 'pending' and created_at < ${cutoff}
          order by created_at limit ${limit} for update skip locked))`;
      break;
    case 'workflowExecutions':
      statement = sql`
        delete from workflow_executions where id = any(array(
          select id from workflow_executions
          where project_id = ${p} and status not in ('RUNNING', 'WAITING') and finished_at < ${cutoff}
          order by finished_at limit ${limit} for update skip locked))`;
      break;
    case 'inbound':
      statement = sql`
        delete from inbound_emails where id = any(array(
          select id from inbound_emails where project_id = ${p} and received_at < ${cutoff}
          order by received_at limit ${limit} for update skip locked))`;
      break;
  }
  const res = await db.execute(statement);
  return res.rowCount ?? 0;
}

/** Every project with its stored overrides (`{}` when none), in id order. */
export async function projectsWithRetention(db: DbOrTx): Promise<{ id: string; retention: ProjectRetention }[]> {
  const rows = await db.execute<{ id: string; retention: ProjectRetention | null }>(
    sql`select id, retention from projects order by id`,
  );
  return rows.rows.map((r) => ({ id: r.id, retention: r.retention ?? {} }));
}

/**
 * A project's stored retention overrides.
 *
 * @returns the overrides (`{}` when none are set), or `undefined` when the project does not exist.
 */
export async function getProjectRetention(db: DbOrTx, projectId: string): Promise<ProjectRetention | undefined> {
  return getProjectOverrides<ProjectRetention>(db, projectId, 'retention');
}

/**
 * Changes a project's retention overrides in one statement: a field given a number is set, a field given `null`
 * is cleared (back to the service default), a field left out keeps its value. Values must already be valid.
 *
 * @returns the overrides after the change (`{}` when none are left), or `undefined` when the project does not exist.
 */
export async function updateProjectRetention(
  db: DbOrTx,
  projectId: string,
  patch: { [K in keyof ProjectRetention]?: number | null },
): Promise<ProjectRetention | undefined> {
  return updateProjectOverrides<ProjectRetention>(db, projectId, 'retention', patch);
}
