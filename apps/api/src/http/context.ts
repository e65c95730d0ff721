/**
 * What the middleware chain attaches to a request (`res.locals`), and the app's dependencies.
 *
 * @module
 */
import type { Queues } from '@mailroom/queues/create';
import type { Config } from '@mailroom/config/config';
import type { Logger } from '@mailroom/platform/logger';
import type { Clock } from '@mailroom/platform/clock';
import type { Database, Db } from '@mailroom/db/client';
import type { ReadReplicas } from '@mailroom/db/replicas';
import type { Redis } from 'ioredis';
import type { KeyKind, KeyMode } from '@mailroom/projects/keys';

/** Everything `createApp` needs; the caller owns (and closes) these. */
export interface AppDeps {
  config: Config;
  database: Database;
  /**
   * The read replicas (`DATABASE_REPLICA_URLS`): read-only routes whose answer may be a few seconds old query
   * through {@link readDb}; absent, they read the primary.
   */
  replicas?: ReadReplicas;
  /** Fail-fast Redis connection (producer role) for the queue and the rate limiter. */
  redis: Redis;
  /**
   * Every queue of the catalog (producer side). Webhook deliveries are enqueued after the transaction that wrote
   * them commits; `maintenance` is only read (the dashboard).
   */
  queues: Queues;
  logger: Logger;
  /** What the send routes' fair-share minute is read from; omitted, the real clock (tests set it). */
  clock?: Clock;
}

/**
 * The handle of a route that only reads and may answer from a replica (lists, searches, stats, previews: see
 * `@mailroom/db/replicas` for what may and may not): a usable replica, else the primary. Never write through it,
 * and never read through it what the same request wrote.
 */
export function readDb(deps: Pick<AppDeps, 'database' | 'replicas'>): Db {
  return deps.replicas?.readDb() ?? deps.database.db;
}

/** The authenticated caller. */
export interface AuthContext {
  projectId: string;
  kind: KeyKind;
  /** `test` for a test key (`sk_test_…`, `pk_test_…`): what the request creates is test data
  /** (`@mailroom/projects/keys`). */
  mode: KeyMode;
  /** The key's id (`api_keys.id`). */
  keyId: string;
  /** `full`, or `sending`: a send-only key (only sending routes let it through). */
  scope: 'full' | 'sending';
  /** A `sending` key's sending domains (lower-case; each covers its subdomains); null: any verified domain. */
  allowedDomains: string[] | null;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace -- Express types `res.locals` through its global namespace
  namespace Express {
    interface Locals {
      requestId: string;
      log: Logger;
      auth?: AuthContext;
    }
  }
}
