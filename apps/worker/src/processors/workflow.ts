/**
 * The `workflow` job: runs one execution as far as it can go now, through the engine
 * (`@mailroom/workflows/engine/engine`, which leases it, runs its steps exactly once each and releases it).
 * This processor translates: the job's payload in; a held execution into a delayed job; what the run committed
 * into send jobs (in the workflow lane, at the project's fair-share priority), webhook deliveries and the
 * execution's next job.
 *
 * @module
 */
import { DelayedError, UnrecoverableError, type Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import {
  SendPriority,
  WorkflowJobPayload,
  type SendJobPayload,
  type WebhookJobPayload,
} from '@mailroom/queues/catalog';
import { relayWebhookDeliveries, enqueueExecutions, enqueueSendJobs } from '@mailroom/queues/enqueue';
import { dataValidator } from '@mailroom/platform/validation';
import { lanePriorities, lanePrioritiesOf } from '@mailroom/queues/send-lanes';
import type { LaneConnectionOf } from '@mailroom/sending/lane-connection';
import { type Config } from '@mailroom/config/config';
import { type Logger } from '@mailroom/platform/logger';
import { type Database } from '@mailroom/db/client';
import { createWorkflowEngine, type WorkflowJobResult } from '@mailroom/workflows/engine/engine';
import { type Handover } from '@mailroom/workflows/engine/run';

const validatePayload = dataValidator(WorkflowJobPayload);

/** Dependencies of the processor. */
export interface WorkflowProcessorDeps {
  config: Config;
  database: Database;
  sendQueue: Queue<SendJobPayload>;
  webhookQueue: Queue<WebhookJobPayload>;
  workflowQueue: Queue<WorkflowJobPayload>;
  logger: Logger;
  /** Counts each project's workflow sends per minute (fair share inside the lane); omitted: no demotion. */
  redis?: Redis;
  /**
   * With several delivery connections, the connection an email's From is bound to: each connection's fair share
   * is counted apart (`@mailroom/sending/lane-connection`). Omitted (one connection): one count per project.
   */
  connectionOf?: LaneConnectionOf;
}

/** Creates the BullMQ processor function of the `workflow` queue. */
export function createWorkflowProcessor(deps: WorkflowProcessorDeps) {
  const engine = createWorkflowEngine({ db: deps.database.db, config: deps.config });
  return async (job: Job, token?: string): Promise<WorkflowJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid workflow payload: ${JSON.stringify(checked.errors)}`);
    const { executionId, projectId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, executionId, projectId });
    const r = await engine.run(executionId, projectId, log, (h) => handOver(deps, h, log));
    if (r.outcome === 'held') {
      // Another job runs it now (or its worker died): look again soon, at the latest when the lease ends.
      await job.moveToDelayed(Math.min(r.until.getTime(), Date.now() + 1_000) + 20, token);
      throw new DelayedError();
    }
    return r;
  };
}

/** Enqueues what a run committed: send jobs, webhook deliveries, the execution's next job. */
async function handOver(deps: WorkflowProcessorDeps, h: Handover, log: Logger): Promise<void> {
  const { projectId } = h.execution;
  if (h.sends.length > 0) {
    try {
      // A project's burst beyond its fair share per minute moves down inside the workflow lane (send-lanes.ts).
      const priorities = await workflowPriorities(deps, h);
      await enqueueSendJobs(
        deps.sendQueue,
        deps.config,
        h.sends.map((emailId, i) => ({ emailId, projectId, priority: priorities[i] ?? SendPriority.workflow })),
      );
    } catch (err) {
      log.warn({ err, emails: h.sends.length }, 'send enqueue failed; the reconciler will enqueue these emails');
    }
  }
  await relayWebhookDeliveries(deps.webhookQueue, deps.config, h.deliveries, log);
  if (h.wake)
    await enqueueExecutions(
      deps.workflowQueue,
      [h.wake.execution],
      log,
      h.wake.at.getTime() - Date.now(),
      h.wake.suffix,
    );
  if (h.rerun) await enqueueExecutions(deps.workflowQueue, [h.rerun.execution], log, 0, h.rerun.suffix);
}

/**
 * The send priorities of a hand-over's emails: the workflow lane, moved down past the project's fair share per
 * minute, counted per delivery connection when there are several (as `/v1/send` counts the transactional lane).
 */
async function workflowPriorities(deps: WorkflowProcessorDeps, h: Handover): Promise<number[]> {
  const { projectId } = h.execution;
  const { connectionOf } = deps;
  if (!connectionOf) return lanePriorities(deps.redis, deps.config, 'workflow', projectId, h.sends.length);
  const connections = await Promise.all(h.sendFroms.map((from) => connectionOf(projectId, from)));
  const each = await lanePrioritiesOf(
    deps.redis,
    deps.config,
    'workflow',
    connections.map((connection) => ({ projectId, count: 1, connection })),
  );
  return each.map((p) => p[0]);
}
