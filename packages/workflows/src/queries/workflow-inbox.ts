/**
 * The workflow inbox drain: recorded events start and wake executions (the drainer is ../engine/inbox.ts).
 *
 * Test mode: an event's `test` (read through the inbox row's `event_id`) is its execution's. A test event starts
 * test executions (entry key `test:…`, so a contact's test entry never blocks its live one, nor the reverse) and
 * wakes only test executions; a live event wakes only live ones.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import { entryStepSql } from './workflow-executions';
import type { ExecutionRef } from './workflow-engine';

/**
 * Takes up to `limit` inbox rows (SKIP LOCKED: drainers in several workers share the inbox) and, in the caller's
 * transaction:
 * - starts an execution of every enabled workflow triggered by each event (`ON CONFLICT (workflow_id, entry_key)
 *   DO NOTHING`: without re-entry a contact enters once, however many identical events arrive at once; with
 *   re-entry once per event), with `workflow.started`;
 * - wakes every execution WAITING for the event since before it was recorded, and whose timeout had not passed
 *   when it was (compare-and-set: `WAITING` and the version move together, so a timeout job running at the same
 *   moment loses; an event recorded after the timeout leaves it to the timeout job);
 * - test mode: an execution has its event's `test`; a wake needs the event and the execution of the same mode.
 *
 * @returns the executions to run, and the webhook deliveries to enqueue once committed.
 */
export async function drainWorkflowInbox(
  tx: DbOrTx,
  limit: number,
): Promise<{ taken: number; started: ExecutionRef[]; woken: ExecutionRef[]; deliveries: WebhookDeliveryRef[] }> {
  const taken = await tx.execute<{ event_id: string }>(sql`
    delete from workflow_inbox where id in (select id from workflow_inbox order by id limit ${limit} for update skip locked)
    returning event_id
  `);
  if (taken.rows.length === 0) return { taken: 0, started: [], woken: [], deliveries: [] };
  const ids = sql`${sql.param(taken.rows.map((r) => r.event_id))}::uuid[]`;
  const started = await tx.execute<{
    id: string;
    project_id: string;
    workflow_id: string;
    contact_id: string;
    trigger: string;
    test: boolean;
  }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, due_at, entry_key, trigger_event_id, context, test)
    select mailroom_uuid_v7(clock_timestamp()), e.project_id, w.id, e.contact_id, 'RUNNING', ${entryStepSql(sql`w.id`)}, now(),
      case when e.test then 'test:' else '' end || case when w.allow_reentry then 'event:' || e.id::text else 'contact:' || e.contact_id::text end, e.id,
      jsonb_build_object('trigger', jsonb_build_object('name', e.name, 'eventId', e.id, 'data', e.data, 'at', e.created_at)), e.test
    from events e
    join workflows w on w.project_id = e.project_id and w.enabled and w.trigger_type = 'EVENT' and w.trigger_event = e.name
    join projects p on p.id = e.project_id and not p.disabled
    where e.id = any(${ids})
    order by e.id
    on conflict (workflow_id, entry_key) do nothing
    returning id, project_id, workflow_id, contact_id, context #>> '{trigger,name}' as trigger, test
  `);
  const woken = await tx.execute<{ id: string; project_id: string; version: number }>(sql`
    update workflow_executions x set status = 'RUNNING', resume_branch = 'event', version = x.version + 1, due_at = now(),
      updated_at = now(), wait_event = null,
      context = x.context || jsonb_build_object('event', jsonb_build_object('name', e.name, 'eventId', e.id, 'data', e.data, 'at', e.created_at))
    from events e
    where e.id = any(${ids}) and x.status = 'WAITING' and x.project_id = e.project_id and x.contact_id = e.contact_id
      and x.wait_event = e.name and x.test = e.test and x.wait_since <= e.created_at and e.created_at <= x.due_at
    returning x.id, x.project_id, x.version
  `);
  const byProject = new Map<string, { type: string; data: Record<string, unknown> }[]>();
  for (const r of started.rows) {
    const list = byProject.get(r.project_id) ?? [];
    const data = {
      workflowId: r.workflow_id,
      executionId: r.id,
      contactId: r.contact_id,
      status: 'RUNNING',
      trigger: r.trigger,
      ...(r.test ? { test: true } : {}),
    };
    list.push({ type: 'workflow.started', data });
    byProject.set(r.project_id, list);
  }
  const deliveries: WebhookDeliveryRef[] = [];
  for (const [projectId, events] of byProject) deliveries.push(...(await recordWebhookEvents(tx, projectId, events)));
  return {
    taken: taken.rows.length,
    started: started.rows.map((r) => ({ id: r.id, projectId: r.project_id, version: 0 })),
    woken: woken.rows.map((r) => ({ id: r.id, projectId: r.project_id, version: r.version })),
    deliveries,
  };
}
