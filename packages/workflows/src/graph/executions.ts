/**
 * Executions started and stopped from outside the engine: a manual start for a contact, and a cancel. Nothing
 * runs here: a started execution is written RUNNING for the engine to run; a cancel bumps the version, so a step
 * in flight loses its move (its email or contact change rolls back).
 *
 * @module
 */
import { AppError, ErrorCode, notFound, validationError } from '@mailroom/platform/errors';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { getWorkflow, type ExecutionRow } from '../queries/workflows';
import { cancelExecution, startManualExecution } from '../queries/workflow-executions';
import { findContactByEmail, getContact } from '@mailroom/contacts/queries/contacts';
import { type Database, type DbOrTx } from '@mailroom/db/client';

/** A manual start as a request gives it: the contact by id or email, and the trigger data (`data`, or Plunk's `context`). */
export interface ManualStartInput {
  contactId?: string;
  email?: string;
  data?: Record<string, unknown>;
  context?: Record<string, unknown>;
}

/**
 * Starts an execution of an enabled workflow for a contact by hand (`test`: a test execution, whose emails go to
 * the test sink). The data becomes `context.trigger.data`.
 *
 * @returns the RUNNING execution (to enqueue once committed) and its `workflow.started` deliveries.
 * @throws {@link AppError} 422 without exactly one of contactId/email, with both data and context, or for an
 * unknown contact; 404 for an unknown workflow; 409 `INVALID_STATE` when it is disabled; 409 `CONFLICT` when the
 * contact already entered a workflow without re-entry.
 */
export async function startExecution(
  tx: DbOrTx,
  projectId: string,
  workflowId: string,
  input: ManualStartInput,
  test: boolean,
): Promise<{ execution: ExecutionRow; deliveries: WebhookDeliveryRef[] }> {
  if ((input.contactId === undefined) === (input.email === undefined)) {
    throw validationError([
      { field: 'contactId', message: 'give either `contactId` or `email`', code: 'invalid_type' },
    ]);
  }
  if (input.data !== undefined && input.context !== undefined) {
    throw validationError([
      { field: 'context', message: "give either `data` or Plunk's `context`, not both", code: 'custom' },
    ]);
  }
  const w = await getWorkflow(tx, projectId, workflowId);
  if (!w) throw notFound('Workflow');
  if (!w.enabled)
    throw new AppError(
      ErrorCode.INVALID_STATE,
      'The workflow is disabled; enable it (PATCH enabled: true) to start executions',
    );
  const contact = input.contactId
    ? await getContact(tx, projectId, input.contactId)
    : await findContactByEmail(tx, projectId, input.email!);
  if (!contact)
    throw validationError([
      { field: input.contactId ? 'contactId' : 'email', message: 'no such contact in this project', code: 'custom' },
    ]);
  const started = await startManualExecution(tx, w, contact.id, input.data ?? input.context ?? {}, test);
  if (!started.ok)
    throw new AppError(ErrorCode.CONFLICT, 'The contact already entered this workflow and it does not allow re-entry');
  return { execution: started.execution, deliveries: started.deliveries };
}

/**
 * Cancels a RUNNING or WAITING execution, for good: its version moves, so no timeout, event or retried job moves
 * it again, and a step in flight loses its effect (except a WEBHOOK call already made). The execution is kept.
 *
 * @returns the CANCELLED execution and its `workflow.cancelled` deliveries (to enqueue).
 * @throws {@link AppError} 404 for an unknown execution; 409 `INVALID_STATE` for a final one.
 */
export async function cancelWorkflowExecution(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  executionId: string,
): Promise<{ execution: ExecutionRow; deliveries: WebhookDeliveryRef[] }> {
  const r = await db.transaction((tx) => cancelExecution(tx, projectId, workflowId, executionId));
  if (!r) throw notFound('Execution');
  if (!r.cancelled) throw new AppError(ErrorCode.INVALID_STATE, `The execution is already ${r.execution.status}`);
  return { execution: r.execution, deliveries: r.deliveries };
}
