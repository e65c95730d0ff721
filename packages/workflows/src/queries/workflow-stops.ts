/**
 * Stopping a workflow's live executions (RUNNING or WAITING), in the caller's transaction: a cancel, a workflow
 * disabled or deleted (`stopExecutions`), or the steps they stand on removed from the graph (`exitExecutionsAt`,
 * used by `deleteStep` and `replaceGraph` of `./workflows`), so no execution is left pointing at nothing.
 *
 * @module
 */
import { and, eq, inArray, sql, type SQL } from 'drizzle-orm';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import { workflowExecutions, workflowStepRuns } from '@mailroom/db/schema';

/**
 * Stops the live (RUNNING or WAITING) executions of a workflow matching `which`: EXITED (`reason` as exit reason) or
 * CANCELLED, version bumped so no pending job, timeout or event moves them again, lease ended, open step runs
 * cancelled, and `workflow.exited` / `workflow.cancelled` written to the outbox, all in the caller's transaction.
 *
 * @returns the stopped rows and the webhook deliveries to enqueue after commit.
 */
export async function stopExecutions(
  tx: DbOrTx,
  projectId: string,
  workflowId: string,
  which: SQL,
  status: 'EXITED' | 'CANCELLED',
  reason: string,
): Promise<{ rows: (typeof workflowExecutions.$inferSelect)[]; deliveries: WebhookDeliveryRef[] }> {
  const rows = await tx
    .update(workflowExecutions)
    .set({
      status,
      ...(status === 'EXITED' ? { exitReason: reason } : {}),
      version: sql`${workflowExecutions.version} + 1`,
      finishedAt: new Date(),
      updatedAt: new Date(),
      waitEvent: null,
      leaseToken: null,
      leaseUntil: null,
    })
    .where(
      and(
        eq(workflowExecutions.projectId, projectId),
        eq(workflowExecutions.workflowId, workflowId),
        which,
        inArray(workflowExecutions.status, ['RUNNING', 'WAITING']),
      ),
    )
    .returning();
  if (rows.length === 0) return { rows, deliveries: [] };
  await closeOpenRuns(
    tx,
    rows.map((e) => e.id),
    'CANCELLED',
    reason,
  );
  const type = `workflow.${status.toLowerCase()}`;
  const deliveries = await recordWebhookEvents(
    tx,
    projectId,
    rows.map((e) => ({
      type,
      data: {
        workflowId,
        executionId: e.id,
        contactId: e.contactId,
        status,
        ...(status === 'EXITED' ? { reason } : {}),
        ...(e.test ? { test: true } : {}),
      },
    })),
  );
  return { rows, deliveries };
}

/** Ends the live executions standing on `stepIds` as EXITED (`step removed`). @returns the deliveries to enqueue. */
export async function exitExecutionsAt(
  tx: DbOrTx,
  projectId: string,
  workflowId: string,
  stepIds: string[],
): Promise<WebhookDeliveryRef[]> {
  if (stepIds.length === 0) return [];
  return (
    await stopExecutions(
      tx,
      projectId,
      workflowId,
      inArray(workflowExecutions.currentStepId, stepIds),
      'EXITED',
      'step removed',
    )
  ).deliveries;
}

/** Marks the RUNNING/WAITING step runs of executions as ended (`status`), with `error`. */
async function closeOpenRuns(
  tx: DbOrTx,
  executionIds: string[],
  status: 'CANCELLED' | 'FAILED',
  error: string,
): Promise<void> {
  await tx
    .update(workflowStepRuns)
    .set({ status, error, finishedAt: new Date() })
    .where(
      and(
        inArray(workflowStepRuns.executionId, executionIds),
        inArray(workflowStepRuns.status, ['RUNNING', 'WAITING']),
      ),
    );
}
