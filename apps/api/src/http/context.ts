/**
 * What the middleware chain attaches to a request (`res.locals`), and the app's dependencies.
 *
 * @module
 */
import type { Queues } from '@mailroom/queues/create';
import type { Config } from '@mailroom/config/config';
import type { Logger } from '@mailroom/platform/logger';
import type { Database } from '@mailroom/db/client';
import type { Redis } from 'ioredis';
import type { KeyKind, KeyMode } from '@mailroom/platform/keys';

/** Everything `createApp` needs; the caller owns (and closes) these. */
export interface AppDeps {
  config: Config;
  database: Database;
  /** Fail-fast Redis connection (producer role) for the queue and the rate limiter. */
  redis: Redis;
  /**
   * Every queue of the catalog (producer side). Webhook deliveries are enqueued after the transaction that wrote
   * them commits; `maintenance` is only read (the dashboard).
   */
  queues: Queues;
  logger: Logger;
}

/** The authenticated caller. */
export interface AuthContext {
  projectId: string;
  kind: KeyKind;
  /** `test` for a test key (`sk_test_…`, `pk_test_…`): what the request creates is test data
  /** (`@mailroom/platform/keys`). */
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
