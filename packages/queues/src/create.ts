/**
 * The producer side of every queue of the catalog, built in one call: {@link createQueues}.
 *
 * @module
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { PlatformConfig } from '@mailroom/platform/config';
import {
  QUEUE_KEYS,
  queueCatalog,
  type CampaignJobPayload,
  type ImportJobPayload,
  type PayloadOf,
  type QueueKey,
  type SendJobPayload,
  type WebhookJobPayload,
  type WorkflowJobPayload,
} from './catalog';
import { queueOptions } from './connection';

/** One `Queue` per catalog entry, typed by its payload, and `closeAll()`, which closes them all (never throws). */
export type Queues = { readonly [K in QueueKey]: Queue<PayloadOf<K>> } & { closeAll(): Promise<void> };

/** Creates the `Queue` of catalog entry `key` on `connection` (which the caller owns and closes). */
export function createQueue<K extends QueueKey>(
  config: Pick<PlatformConfig, 'queuePrefix'>,
  connection: Redis,
  key: K,
): Queue<PayloadOf<K>> {
  return new Queue<PayloadOf<K>>(queueCatalog[key].name, queueOptions(config, connection));
}

/**
 * Creates every queue of the catalog on `connection`. `closeAll()` closes the queues, not the connection: the
 * caller owns that (several processes' parts share it).
 */
export function createQueues(config: Pick<PlatformConfig, 'queuePrefix'>, connection: Redis): Queues {
  const queues = Object.fromEntries(QUEUE_KEYS.map((key) => [key, createQueue(config, connection, key)])) as {
    [K in QueueKey]: Queue<PayloadOf<K>>;
  };
  return {
    ...queues,
    closeAll: async () => {
      await Promise.all(
        QUEUE_KEYS.map(async (key) => {
          await queues[key].close().catch(() => undefined);
          quietAfterClose(queues[key]);
        }),
      );
    },
  };
}

/**
 * Keeps a closed queue's connection from throwing an unhandled `error`. BullMQ 5 (`RedisConnection.close`) removes
 * every listener of the queue's connection when the queue closes, but on a shared connection (ours: the caller owns
 * it) a start still in flight is not cancelled: it rejects when the owner then disconnects, and BullMQ emits that
 * as `error` on the connection, which with no listener throws (seen in CI: a test file taken down by an
 * `Unhandled error. (Error: Stream isn't writeable …)` after an app closed its queues while they were connecting).
 */
function quietAfterClose(queue: Queue): void {
  queue['connection'].on('error', () => undefined);
}

/** The queues of `queues`, in catalog order (for code that treats them all alike: metrics, the dashboard). */
export function queueList(queues: Queues): Queue[] {
  return QUEUE_KEYS.map((key) => queues[key] as Queue);
}

/** Creates the producer side of the `send` queue. */
export function createSendQueue(config: Pick<PlatformConfig, 'queuePrefix'>, connection: Redis): Queue<SendJobPayload> {
  return createQueue(config, connection, 'send');
}

/** Creates the producer side of the `contact-import` queue. */
export function createImportQueue(
  config: Pick<PlatformConfig, 'queuePrefix'>,
  connection: Redis,
): Queue<ImportJobPayload> {
  return createQueue(config, connection, 'import');
}

/** Creates the producer side of the `campaign` queue. */
export function createCampaignQueue(
  config: Pick<PlatformConfig, 'queuePrefix'>,
  connection: Redis,
): Queue<CampaignJobPayload> {
  return createQueue(config, connection, 'campaign');
}

/** Creates the producer side of the `webhook` queue. */
export function createWebhookQueue(
  config: Pick<PlatformConfig, 'queuePrefix'>,
  connection: Redis,
): Queue<WebhookJobPayload> {
  return createQueue(config, connection, 'webhook');
}

/** Creates the producer side of the `workflow` queue. */
export function createWorkflowQueue(
  config: Pick<PlatformConfig, 'queuePrefix'>,
  connection: Redis,
): Queue<WorkflowJobPayload> {
  return createQueue(config, connection, 'workflow');
}
