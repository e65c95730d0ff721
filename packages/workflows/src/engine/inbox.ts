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
 * ones; a live event wakes only live ones (../queries/workflow-inbox.ts).
 *
 * The drainer knows no queue: each committed batch is handed to the caller, who enqueues its executions and
 * webhook deliveries.
 *
 * @module
 */
import { Client } from 'pg';
import { type Logger, logged } from '@mailroom/platform/logger';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { type Database } from '@mailroom/db/client';
import { drainWorkflowInbox } from '../queries/workflow-inbox';
import { type ExecutionRef } from '../queries/workflow-engine';

/** Inbox rows per transaction. */
const BATCH = 500;

/** The Postgres NOTIFY channel of the inbox trigger (migration 0007). */
export const INBOX_CHANNEL = 'mailroom_workflow_inbox';

/** One committed batch: the executions it started and woke (to run now), and the `workflow.started` deliveries. */
export interface InboxBatch {
  started: ExecutionRef[];
  woken: ExecutionRef[];
  deliveries: WebhookDeliveryRef[];
}

/** How many events were taken, executions started and woken. */
export interface InboxTotals {
  events: number;
  started: number;
  woken: number;
}

/**
 * Drains the inbox until it is empty, one transaction of at most 500 rows at a time; `onBatch` gets each batch
 * after it committed. @returns the totals.
 */
export async function drainInboxOnce(
  db: Database['db'],
  onBatch: (batch: InboxBatch) => Promise<void>,
): Promise<InboxTotals> {
  const totals = { events: 0, started: 0, woken: 0 };
  for (;;) {
    const batch = await db.transaction((tx) => drainWorkflowInbox(tx, BATCH));
    if (batch.taken === 0) break;
    totals.events += batch.taken;
    totals.started += batch.started.length;
    totals.woken += batch.woken.length;
    await onBatch({ started: batch.started, woken: batch.woken, deliveries: batch.deliveries });
    if (batch.taken < BATCH) break;
  }
  return totals;
}

/** What {@link startInboxListener} needs: where to LISTEN, how often to poll (ms), and the drain to run. */
export interface InboxListenerDeps {
  databaseUrl: string;
  pollMs: number;
  logger: Logger;
  /** One drain until empty (typically {@link drainInboxOnce} with the caller's hand-over). */
  drain: () => Promise<InboxTotals>;
}

/**
 * Starts listening (NOTIFY on {@link INBOX_CHANNEL}, reconnecting after a lost connection) and polling every
 * `pollMs`; each signal runs `drain`, one drain at a time (a signal during a drain runs one more after it).
 *
 * @returns `stop()`, which waits for a running drain to end.
 */
export function startInboxListener(deps: InboxListenerDeps): { stop: () => Promise<void> } {
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
          const t = await deps.drain();
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
    void logged(c.end(), log, 'workflow inbox connection end', 'debug');
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
      connectionString: deps.databaseUrl,
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
        await logged(c.end(), log, 'workflow inbox connection end', 'debug');
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
  const poll = setInterval(kick, deps.pollMs);
  poll.unref();

  return {
    stop: async () => {
      stopped = true;
      clearInterval(poll);
      if (retry) clearTimeout(retry);
      await running;
      const c = client;
      client = undefined;
      if (c) await logged(c.end(), log, 'workflow inbox connection end', 'debug');
    },
  };
}
