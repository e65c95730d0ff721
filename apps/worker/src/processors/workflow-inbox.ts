/**
 * The workflow inbox drainer: turns recorded events into executions started and executions woken.
 *
 * A trigger on `events` writes an inbox row, in the inserting transaction, for each event an enabled workflow
 * starts on or a WAITING execution waits for, and NOTIFYs `mailroom_workflow_inbox` on commit. Every worker
 * process LISTENs on a connection of its own and drains on each notification, and also every
 * `WORKFLOW_INBOX_POLL_MS` (a notification sent while no one listened is not lost: the rows are). Several
 * drainers share the inbox with SKIP LOCKED; a batch's rows, the executions it starts and the wakes it makes
 * commit together, so an event is handled once even when a drainer dies mid-batch.
 *
 * The API's `/v1/track` only inserts the event: nothing of a workflow runs in the request.
 *
 * Test mode: a test event (`events.test`, recorded with a test key) starts test executions and wakes only test
 * ones; a live event wakes only live ones (packages/db/src/queries/workflow-inbox.ts).
 *
 * @module
 */
import { Client } from 'pg';
import type { Queue } from 'bullmq';
import { type WebhookJobPayload, type WorkflowJobPayload } from '@mailroom/queues/catalog';
import { announceWebhookDeliveries, enqueueExecutions } from '@mailroom/queues/enqueue';
import { type Config } from '@mailroom/platform/config';
import { type Logger } from '@mailroom/platform/logger';
import { drainWorkflowInbox } from '@mailroom/workflows/queries/workflow-inbox';
import { type Database } from '@mailroom/db/client';

/** Inbox rows per transaction. */
const BATCH = 500;

/** The Postgres NOTIFY channel of the inbox trigger (migration 0007). */
export const INBOX_CHANNEL = 'mailroom_workflow_inbox';

/** Dependencies of the drainer. */
export interface WorkflowInboxDeps {
  config: Config;
  database: Database;
  workflowQueue: Queue<WorkflowJobPayload>;
  webhookQueue: Queue<WebhookJobPayload>;
  logger: Logger;
}

/**
 * Drains the inbox until it is empty. @returns how many events were taken, executions started and woken.
 */
export async function drainInboxOnce(deps: WorkflowInboxDeps): Promise<{ events: number; started: number; woken: number }> {
  const totals = { events: 0, started: 0, woken: 0 };
  for (;;) {
    const batch = await deps.database.db.transaction((tx) => drainWorkflowInbox(tx, BATCH));
    if (batch.taken === 0) break;
    totals.events += batch.taken;
    totals.started += batch.started.length;
    totals.woken += batch.woken.length;
    await enqueueExecutions(deps.workflowQueue, [...batch.started, ...batch.woken], deps.logger);
    await announceWebhookDeliveries(deps.webhookQueue, deps.config, batch.deliveries, deps.logger);
    if (batch.taken < BATCH) break;
  }
  return totals;
}

/** Starts listening and polling. @returns `stop()`, which waits for a running drain to end. */
export function startWorkflowInbox(deps: WorkflowInboxDeps): { stop: () => Promise<void> } {
  const log = deps.logger.child({ component: 'workflow-inbox' });
  let stopped = false;
  let running: Promise<void> | undefined;
  let again = false;

  const kick = (): void => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        try {
          const t = await drainInboxOnce(deps);
          if (t.events > 0) log.debug(t, 'workflow inbox drained');
        } catch (err) {
          log.error({ err }, 'workflow inbox drain failed; retrying on the next poll');
        }
      } while (again && !stopped);
    })().finally(() => (running = undefined));
  };

  let client: Client | undefined;
  /** The newest connection attempt; losses reported by older ones are already handled. */
  let current: Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  /** One reconnection at a time, whatever reported the loss (an 'error', an 'end', a failed connect). */
  const reconnectLater = (c: Client): void => {
    if (client === c) client = undefined;
    c.end().catch(() => undefined);
    if (stopped || retry || c !== current) return;
    current = undefined;
    retry = setTimeout(() => {
      retry = undefined;
      void listen();
    }, 1_000);
    retry.unref();
  };
  const listen = async (): Promise<void> => {
    if (stopped) return;
    // Bounded connect, and TCP keepalive so that a connection whose packets are silently dropped is noticed.
    const c = new Client({
      connectionString: deps.config.databaseUrl,
      application_name: 'mailroom-workflow-inbox',
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    current = c;
    c.on('notification', kick);
    // A terminated backend, a failover or a restart: the poll keeps draining meanwhile; reconnect the listener.
    c.on('error', (err) => {
      log.warn({ err: err.message }, 'workflow inbox LISTEN connection lost; reconnecting');
      reconnectLater(c);
    });
    c.on('end', () => reconnectLater(c));
    try {
      await c.connect();
      await c.query(`LISTEN ${INBOX_CHANNEL}`);
      if (stopped) {
        await c.end().catch(() => undefined);
        return;
      }
      client = c;
      kick();
    } catch (err) {
      log.warn({ err }, 'workflow inbox LISTEN failed; polling only until it reconnects');
      reconnectLater(c);
    }
  };
  void listen();
  const poll = setInterval(kick, deps.config.workflowInboxPollMs);
  poll.unref();

  return {
    stop: async () => {
      stopped = true;
      clearInterval(poll);
      if (retry) clearTimeout(retry);
      await running;
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
  };
}
