/**
 * Postgres access: one `pg` pool per process wrapped by Drizzle.
 *
 * @module
 */
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { Pool } from 'pg';
import * as schema from './schema';

export type Schema = typeof schema;
/** The Drizzle database handle. */
export type Db = NodePgDatabase<Schema>;
/** A transaction handle, accepted wherever {@link Db} is (queries take `DbOrTx` first). */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
export type DbOrTx = Db | Tx;

/** A pool and its Drizzle wrapper; `close()` ends every connection. */
export interface Database {
  db: Db;
  pool: Pool;
  close(): Promise<void>;
}

/**
 * The connections' startup `options`: no JIT compilation (docs/decisions/0023-connections-without-jit.md), since every
 * statement here is OLTP and, once history grows, the planner's estimates cross `jit_above_cost` and a statement of a
 * few ms pays tens of ms compiling; generic plans when `genericPlans` (see {@link createDatabase}); then whatever
 * `PGOPTIONS` and the URL's own `options` parameter say (they come last, so they may set `jit` or `plan_cache_mode`
 * back).
 */
function sessionOptions(url: string, genericPlans: boolean): string {
  let fromUrl: string | null = null;
  try {
    fromUrl = new URL(url).searchParams.get('options');
  } catch {
    // Not a URL pg can read either: it reports that itself when connecting.
  }
  return ['-c jit=off', genericPlans ? '-c plan_cache_mode=force_generic_plan' : null, process.env.PGOPTIONS, fromUrl]
    .filter(Boolean)
    .join(' ');
}

/**
 * Opens a pool.
 *
 * @param options.url - Postgres connection string.
 * @param options.poolSize - maximum connections of this process (budget: docs/self-hosting/sizing.md).
 * @param options.applicationName - shown in `pg_stat_activity`.
 * @param options.onConnectionError - told of a connection lost outside a query (for logging); never throws.
 * @param options.genericPlans - the connections run every parameterised statement on a generic plan
 *   (`plan_cache_mode = force_generic_plan`): a named statement is planned once per connection instead of again for
 *   each call's values; an unnamed one still gets a new (generic) plan at every call. Only for a pool whose every
 *   statement is written for it: rows reached by key, so a plan made for no particular value is as good as one made
 *   for the values. Postgres's own choice (`auto`) kept re-planning the send path's batched claim and finish at
 *   every call: 1.7–2.7 ms of planning against 0.6–2.9 ms to run (docs/decisions/0004-generic-plan-send-pool.md).
 * @param options.maxLifetimeSeconds - a connection is closed and replaced after this long (0 or absent: never), so
 *   that a generic plan made while a table was small does not outlive the estimates it was made from.
 * @param options.connectionTimeoutMillis - how long to wait for a new connection before failing (ms, default 5000).
 */
export function createDatabase(options: {
  url: string;
  poolSize: number;
  applicationName: string;
  onConnectionError?: (err: Error) => void;
  genericPlans?: boolean;
  maxLifetimeSeconds?: number;
  connectionTimeoutMillis?: number;
}): Database {
  const pool = new Pool({
    connectionString: options.url,
    max: options.poolSize,
    application_name: options.applicationName,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 5_000,
    idleTimeoutMillis: 30_000,
    // TCP keepalive: a connection whose packets are silently dropped (a failover behind a NAT) is noticed.
    keepAlive: true,
    options: sessionOptions(options.url, options.genericPlans === true),
    maxLifetimeSeconds: options.maxLifetimeSeconds ?? 0,
  });
  // An idle client that loses its server also emits on the pool; the client's own listener below reports it.
  pool.on('error', () => undefined);
  // A checked-out client has no pool listener (pg-pool removes it while the client is lent out): a connection
  // that dies between two statements of a transaction (`pg_terminate_backend`, a failover, a pgbouncer restart,
  // `idle_in_transaction_session_timeout`) would emit an unhandled 'error' and end the process. The statement in
  // flight, or the next one, rejects on its own, and the pool drops the client when it is released.
  pool.on('connect', (client) => {
    client.on('error', (err) => options.onConnectionError?.(err));
  });
  const db = drizzle(pool, { schema });
  let closed = false;
  return {
    db,
    pool,
    close: async () => {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
