/**
 * Postgres read replicas: the pools of the streaming replicas (`DATABASE_REPLICA_URLS`), their periodic health and
 * lag checks, and the one read handle ({@link ReadReplicas.readDb}) that sends a query to a usable replica or, when
 * none is usable, to the primary.
 *
 * Which reads may go to a replica (its answer may be up to `DATABASE_REPLICA_MAX_LAG_MS` old, plus one check
 * interval):
 * - lists, searches and stats whose caller accepts a few seconds' staleness: `GET /contacts` (search, filter),
 *   `GET /events`, `GET /campaigns`, `GET /campaigns/{id}/stats`, `GET /segments`, `GET /segments/{id}/contacts`,
 *   `POST /segments/preview`, `GET /reputation`, `GET /admin/stats` and the other collection listings.
 *
 * What stays on the primary ({@link Database.db}):
 * - every write, and every read inside a transaction that writes;
 * - idempotency keys (a replayed answer must be the committed one), the send path (suppressions, quotas, claims)
 *   and everything the worker does;
 * - authentication (a key issued a moment ago must work), and single-item reads (`GET /contacts/{id}`,
 *   `GET /emails/{id}`): clients read an item right after creating it, in the next request;
 * - any read that must see a write made earlier in the same request.
 *
 * Lag is measured every `checkIntervalMs` on a connection of its own per replica, never per query. A replica whose
 * WAL receiver is running and which has replayed everything it received has lag 0 (an idle primary commits
 * nothing, so `pg_last_xact_replay_timestamp()` ages without the replica falling behind). With WAL waiting, the lag
 * is the smaller of `now() - pg_last_xact_replay_timestamp()` and the time since a check last found it caught up
 * (after a quiet spell the first new commit would otherwise look as old as the spell). A server not in recovery
 * (promoted, or not a replica at all), one in recovery that has replayed nothing yet with WAL waiting, and one that
 * does not answer within the check timeout are skipped until a later check finds them usable. A query that fails on a replica with a connection error (or
 * is cancelled by a recovery conflict) marks that replica down at once and is retried, once, on the primary: a
 * replica that goes away costs a retry, never an error.
 *
 * @module
 */
import { drizzle } from 'drizzle-orm/node-postgres';
import { Pool, type PoolClient, type QueryConfig, type QueryResult, type QueryResultRow } from 'pg';
import { errorCode, isUnavailableError, rootMessage } from '@mailroom/platform/errors';
import { createDatabase, type Database, type Db } from './client';
import * as schema from './schema';

/** Why a replica is or is not used. */
export type ReplicaState = 'unknown' | 'ok' | 'lagging' | 'down' | 'not-replica';

/** A replica as the last check found it. */
export interface ReplicaStatus {
  /** `host:port/database` of the replica (no credentials): the metrics' `replica` label. */
  name: string;
  state: ReplicaState;
  /** Replay lag in ms at the last check; `null` when unknown (down, not a replica, nothing replayed yet). */
  lagMs: number | null;
  /** When the last check finished (epoch ms); 0 before the first. */
  checkedAt: number;
}

/** Where a read went: `replica` (a usable replica) or `primary` (none usable, or retried after a replica failed). */
export type ReadConnection = 'primary' | 'replica';

/** A count of {@link ReadReplicas.readCounts}. */
export interface ReadCount {
  connection: ReadConnection;
  replica: string;
  count: number;
}

/** Options of {@link createReadReplicas}. */
export interface ReadReplicaOptions {
  /** The primary; its pool serves reads when no replica is usable. Not closed by {@link ReadReplicas.close}. */
  primary: Database;
  /** Connection strings of the replicas (may be empty: every read then goes to the primary). */
  urls: readonly string[];
  /** Connections per replica pool. */
  poolSize: number;
  /** `application_name` of the replica pools' connections (their checks add `-check`). */
  applicationName: string;
  /** A replica lagging more than this (ms) is skipped. */
  maxLagMs: number;
  /** Time between two checks of a replica (ms). */
  checkIntervalMs: number;
  /** Told when a replica's state changes (for logging); never throws. */
  onStateChange?: (status: ReplicaStatus, previous: ReplicaState, reason?: string) => void;
}

/** The read side: a handle for read-only queries and the replicas' state. */
export interface ReadReplicas {
  /**
   * The Drizzle handle of reads that may be stale by up to the lag limit (see the module's TSDoc for which).
   * Each query (or transaction) goes to the next usable replica, round-robin, else to the primary; never write
   * through it. With no replica configured it is the primary's own handle.
   */
  readDb(): Db;
  /** Each replica's state at its last check. */
  status(): ReplicaStatus[];
  /**
   * Reads run since start, by where they went (`replica`: the replica's name; `''` for the primary). A query and
   * a transaction count one each; a read retried on the primary counts on both.
   */
  readCounts(): ReadCount[];
  /** Checks every replica now (the periodic checks run anyway); resolves when done. */
  checkNow(): Promise<void>;
  /** Stops the checks and closes the replica pools (not the primary). */
  close(): Promise<void>;
}

/** A replica's lag, as one statement: see the module's TSDoc for the rule. */
const LAG_QUERY = `select pg_is_in_recovery() as in_recovery,
  (select pid from pg_stat_wal_receiver) is not null
    and pg_last_wal_receive_lsn() is not distinct from pg_last_wal_replay_lsn() as caught_up,
  (extract(epoch from now() - pg_last_xact_replay_timestamp()) * 1000)::float8 as replay_age_ms`;

/** Errors after which a read is retried on the primary: the replica is unreachable, or cancelled the query. */
export function isReplicaFailure(err: unknown): boolean {
  if (isUnavailableError(err)) return true;
  const code = errorCode(err);
  // A hot standby cancels a query whose rows replay is about to remove: "conflict with recovery".
  return (code === '40001' || code === '40P01') && /conflict with recovery/i.test(rootMessage(err));
}

/** `host:port/database` of a connection string, without its credentials. */
export function replicaName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'replica';
  }
}

interface Replica {
  status: ReplicaStatus;
  database: Database;
  /** One connection, for the checks only: a busy pool never delays a check. */
  checker: Pool;
  /** When a check last found it caught up (epoch ms, this process's clock, taken as the check started); 0: never. */
  caughtUpAt: number;
}

/**
 * The pool the read handle's Drizzle instance runs on: each `query()` (and each `connect()`, which a transaction
 * makes) picks a target; a replica failure falls back to the primary once. Drizzle recognises a pool by its class
 * name containing `Pool` (it then takes a connection for a transaction instead of running `BEGIN` on the pool).
 */
class RoutingPool {
  constructor(
    private readonly primary: Pool,
    private readonly pick: () => Replica | undefined,
    private readonly failed: (replica: Replica, err: unknown) => void,
    private readonly onRead: (connection: ReadConnection, replica?: Replica) => void,
  ) {}

  async query<R extends QueryResultRow>(config: QueryConfig | string, values?: unknown[]): Promise<QueryResult<R>> {
    const replica = this.pick();
    if (replica) {
      try {
        this.onRead('replica', replica);
        const result = await replica.database.pool.query<R>(config as QueryConfig, values);
        return result;
      } catch (err) {
        if (!isReplicaFailure(err)) throw err;
        this.failed(replica, err);
      }
    }
    this.onRead('primary');
    return this.primary.query<R>(config as QueryConfig, values);
  }

  async connect(): Promise<PoolClient> {
    const replica = this.pick();
    if (replica) {
      try {
        this.onRead('replica', replica);
        const client = await replica.database.pool.connect();
        return client;
      } catch (err) {
        if (!isReplicaFailure(err)) throw err;
        this.failed(replica, err);
      }
    }
    this.onRead('primary');
    return this.primary.connect();
  }
}

/**
 * Opens the replica pools and starts their checks (the first at once; until it answers a replica is `unknown` and
 * reads go to the primary).
 *
 * @returns the read side; with no `urls` every read of {@link ReadReplicas.readDb} goes to the primary.
 */
export function createReadReplicas(options: ReadReplicaOptions): ReadReplicas {
  const counts = new Map<string, ReadCount>();
  const onRead = (connection: ReadConnection, replica?: Replica) => {
    const name = replica?.status.name ?? '';
    const key = `${connection}\t${name}`;
    const c = counts.get(key);
    if (c) c.count++;
    else counts.set(key, { connection, replica: name, count: 1 });
  };
  const replicas: Replica[] = options.urls.map((url) => ({
    status: { name: replicaName(url), state: 'unknown', lagMs: null, checkedAt: 0 },
    database: createDatabase({
      url,
      poolSize: options.poolSize,
      applicationName: options.applicationName,
      connectionTimeoutMillis: 2_000,
    }),
    checker: new Pool({
      connectionString: url,
      max: 1,
      application_name: `${options.applicationName}-check`,
      connectionTimeoutMillis: 2_000,
      idleTimeoutMillis: 0,
    }),
    caughtUpAt: 0,
  }));
  for (const r of replicas) r.checker.on('error', () => undefined);

  const setState = (r: Replica, state: ReplicaState, lagMs: number | null, reason?: string) => {
    const previous = r.status.state;
    r.status = { ...r.status, state, lagMs, checkedAt: Date.now() };
    if (previous !== state) {
      try {
        options.onStateChange?.({ ...r.status }, previous, reason);
      } catch {
        // Logging never breaks a check.
      }
    }
  };

  const check = async (r: Replica): Promise<void> => {
    try {
      const timeout = Math.max(1_000, Math.min(options.checkIntervalMs * 2, 5_000));
      const startedAt = Date.now();
      const { rows } = await r.checker.query<{
        in_recovery: boolean;
        caught_up: boolean;
        replay_age_ms: number | null;
      }>({ text: LAG_QUERY, query_timeout: timeout } as QueryConfig);
      const row = rows[0];
      if (!row.in_recovery) return setState(r, 'not-replica', null, 'not in recovery');
      if (row.caught_up) {
        r.caughtUpAt = startedAt;
        return setState(r, 'ok', 0);
      }
      // WAL waits to be replayed. The replica holds every commit older than the last replayed one, and (its receiver
      // running) everything it had received when a check last found it caught up: its lag is at most either age.
      const bounds = [row.replay_age_ms, r.caughtUpAt > 0 ? Date.now() - r.caughtUpAt : null].filter(
        (v): v is number => v !== null,
      );
      if (bounds.length === 0) return setState(r, 'lagging', null, 'nothing replayed yet');
      const lag = Math.max(0, Math.min(...bounds));
      setState(r, lag > options.maxLagMs ? 'lagging' : 'ok', lag);
    } catch (err) {
      setState(r, 'down', null, rootMessage(err));
    }
  };

  let stopped = false;
  const running = new Set<Promise<void>>();
  const checkAll = async () => {
    const round = Promise.all(replicas.map(check)).then(() => undefined);
    running.add(round);
    try {
      await round;
    } finally {
      running.delete(round);
    }
  };
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      void checkAll().finally(schedule);
    }, options.checkIntervalMs);
    timer.unref();
  };
  if (replicas.length > 0) void checkAll().finally(schedule);

  let next = 0;
  const pick = (): Replica | undefined => {
    for (let i = 0; i < replicas.length; i++) {
      const r = replicas[(next + i) % replicas.length];
      if (r.status.state === 'ok') {
        next = (next + i + 1) % replicas.length;
        return r;
      }
    }
    return undefined;
  };
  const failed = (r: Replica, err: unknown) => setState(r, 'down', null, rootMessage(err));

  // Also with no replica: every read is then counted as a primary read, so the counter tells the same story either way.
  const readDb = drizzle(new RoutingPool(options.primary.pool, pick, failed, onRead) as unknown as Pool, {
    schema,
  }) as Db;

  return {
    readDb: () => readDb,
    status: () => replicas.map((r) => ({ ...r.status })),
    readCounts: () => [...counts.values()].map((c) => ({ ...c })),
    checkNow: () => checkAll(),
    close: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      await Promise.all([...running]);
      await Promise.all(replicas.flatMap((r) => [r.database.close(), r.checker.end()]));
    },
  };
}
