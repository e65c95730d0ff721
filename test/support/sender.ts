/**
 * The set-up of the send path's tests without BullMQ workers or SES: the file's configuration, a Postgres pool, a
 * Redis connection, one project with a verified sending domain, and the email sender (`createEmailSender`) on a
 * transport the file scripts; with `sendQueue`, the send queue too (its keys deleted after the file). All closed
 * after the file.
 */
import IORedis from 'ioredis';
import type { Queue } from 'bullmq';
import type { Config } from '@mailroom/config/config';
import { createDatabase, type Database } from '@mailroom/db/client';
import type { SendJobPayload, WebhookJobPayload } from '@mailroom/queues/catalog';
import { createSendQueue } from '@mailroom/queues/create';
import { createEmailSender } from '@mailroom/sending/job';
import type { MailTransport } from '@mailroom/sending/ses/transport';
import { createTestProject, deletePrefix, testConfig, type TestProject } from './harness';

/** A webhook queue that takes every job and keeps none (the send path's tests do not follow webhooks). */
export const discardingWebhookQueue = {
  addBulk: () => Promise.resolve([]),
  add: () => Promise.resolve(undefined),
} as unknown as Queue<WebhookJobPayload>;

/** What {@link useSender} makes; each accessor but `config` throws when asked before `beforeAll` made it. */
export interface SenderFixture {
  readonly config: Config;
  readonly database: Database;
  readonly redis: IORedis;
  readonly p: TestProject;
  readonly send: ReturnType<typeof createEmailSender>;
  /** Only with `sendQueue: true`. */
  readonly sendQueue: Queue<SendJobPayload>;
}

/** What {@link useSender} sets up. */
export interface SenderOptions {
  /** The pool's `application_name` (to tell the file's connections apart in `pg_stat_activity`). */
  name: string;
  /** Overrides of the test environment (`SEND_LEASE_MS`, …). */
  env: Record<string, string>;
  transport: MailTransport;
  /** Where the sender enqueues webhooks (default {@link discardingWebhookQueue}). */
  webhookQueue?: Queue<WebhookJobPayload>;
  /** Makes a send queue on the file's queue prefix (default false). */
  sendQueue?: boolean;
}

/** Registers the `beforeAll` that makes the fixture and the `afterAll` that closes it. */
export function useSender(options: SenderOptions): SenderFixture {
  const config = testConfig(options.env);
  let database: Database | undefined;
  let redis: IORedis | undefined;
  let sendQueue: Queue<SendJobPayload> | undefined;
  let made: Omit<SenderFixture, 'config' | 'sendQueue'> | undefined;
  beforeAll(async () => {
    database = createDatabase({ url: config.databaseUrl, poolSize: 2, applicationName: options.name });
    // BullMQ's queue needs a connection that retries its commands for ever; the sender alone needs none.
    redis = new IORedis(config.redisUrl, options.sendQueue ? { maxRetriesPerRequest: null } : {});
    if (options.sendQueue) sendQueue = createSendQueue(config, redis);
    const p = await createTestProject(database);
    const webhookQueue = options.webhookQueue ?? discardingWebhookQueue;
    const send = createEmailSender({ config, database, transport: options.transport, webhookQueue, redis });
    made = { database, redis, p, send };
  });
  afterAll(async () => {
    await sendQueue?.close();
    if (sendQueue && redis) await deletePrefix(redis, config.queuePrefix);
    redis?.disconnect();
    await database?.close();
  });
  const ready = () => {
    if (!made) throw new Error('useSender: the fixture is made in beforeAll');
    return made;
  };
  return {
    config,
    get database() {
      return ready().database;
    },
    get redis() {
      return ready().redis;
    },
    get p() {
      return ready().p;
    },
    get send() {
      return ready().send;
    },
    get sendQueue() {
      if (!sendQueue) throw new Error('useSender: no send queue (sendQueue: true) or not made yet');
      return sendQueue;
    },
  };
}
