/**
 * What the middleware chain attaches to a request (`res.locals`), and the app's dependencies.
 *
 * @module
 */
import type { CampaignJobPayload, WebhookJobPayload, ImportJobPayload, SendJobPayload, WorkflowJobPayload } from '@mailroom/queues/catalog';
import type { Config } from '@mailroom/platform/config';
import type { Logger } from '@mailroom/platform/logger';
import type { Database } from '@mailroom/db/client';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { KeyKind, KeyMode } from '@mailroom/platform/keys';

/** Everything `createApp` needs; the caller owns (and closes) these. */
export interface AppDeps {
  config: Config;
  database: Database;
  /** Fail-fast Redis connection (producer role) for the queue and the rate limiter. */
  redis: Redis;
  sendQueue: Queue<SendJobPayload>;
  importQueue: Queue<ImportJobPayload>;
  campaignQueue: Queue<CampaignJobPayload>;
  /** Deliveries of outbound webhooks, enqueued after the transaction that wrote them commits. */
  webhookQueue: Queue<WebhookJobPayload>;
  /** Runs of workflow executions started by hand (`POST /workflows/{id}/executions`). */
  workflowQueue: Queue<WorkflowJobPayload>;
  logger: Logger;
}

/** The authenticated caller. */
export interface AuthContext {
  projectId: string;
  kind: KeyKind;
  /** `test` for a test key (`sk_test_…`, `pk_test_…`): what the request creates is test data (README "Test mode"). */
  mode: KeyMode;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Locals {
      requestId: string;
      log: Logger;
      auth?: AuthContext;
    }
  }
}
