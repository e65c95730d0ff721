/**
 * History growth (`npm run bench -- history`, docs/performance.md#history-growth): the reads and writes that must stay
 * flat as history grows, measured with BENCH_HISTORY_ROWS (default 1,000,000) transactional emails and as many contact
 * events, then again after growing both to ten times that (BENCH_HISTORY_GROWTH, default 10), in one project with a
 * fixed set of contacts (BENCH_HISTORY_CONTACTS, default 100,000, at most rows / 10) and a fixed SENT campaign to all
 * of them. The history is written with set-based SQL (`bench/history-fill.ts`), spread over 12 months of UUIDv7 ids.
 *
 * At each size, with the API in its own process:
 * - p50/p99 of sequential calls: `GET /contacts` (first page, and `subscribed=false`), `GET /emails/{id}` of
 *   random emails (sampled anew at each size), `GET /campaigns/{id}/stats`, `POST /segments/preview` with
 *   `event.purchase exists`, a count filter (`event.purchase >= 2`) and a window (`event.purchase within 30 days`);
 * - `POST /v1/track` (autocannon, 10 connections, BENCH_HISTORY_SECONDS, default 5 s) on existing contacts;
 * - "dropping a month of history": one retention pass (`runRetentionPass`, no time budget) with a project
 *   override that makes the oldest month of emails (with their timelines) and events expire (on a partitioned schema
 *   the oldest calendar months, so whole partitions go; else 330 days, the fill's oldest 30-day month). Which path ran is reported: batched deletes, or partitions when `emails`/`events` are
 *   partitioned (`pg_partitioned_table`); the emptied month is refilled by the next size's fill. The partitions'
 *   time is printed apart from the batches that follow (the under-a-day of rows between the month's end and the
 *   whole-day cutoff: a day of traffic, which grows with the traffic per day). Meanwhile one connection reads the
 *   current month of `emails` and `events` by id, one read after the other: their longest wait is what the hot path
 *   feels of the drop (a detach locks the parent; the file freeing of the dropped table's commit locks nothing else).
 *   On a partitioned schema, a second pass follows at each size: the dropped months refilled with exactly the rows
 *   the smallest size's drop removed (`addHistory`), then dropped again: the same bytes freed at both sizes, with
 *   ten times the history around them at the larger one.
 *
 * Then it prints each figure at both sizes and the ratio (goal ≤ 1.3×), the bytes per row of every history table
 * (`bench/history-sizing.ts`) and the connections an API and a worker process really open
 * (`bench/history-connections.ts`). BENCH_HISTORY_ROWS=100000 gives a quick check. BENCH_HISTORY_LOCK=<file> holds an
 * exclusive flock on that file while measuring (not while filling), for a machine shared with other heavy jobs.
 */
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { sql } from 'drizzle-orm';
import { loadConfig, type Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import { updateProjectRetention } from '@mailroom/retention/queries/retention';
import { createLogger } from '@mailroom/platform/logger';
import { runRetentionPass } from '@mailroom/retention/retention';
import { freePort, waitForHttp } from '../test/support/services';
import { apiCaller } from './http';
import { addHistory, createFixture, fillTo, months, type HistoryFixture } from './history-fill';
import { historySizing } from './history-sizing';
import { countConnections } from './history-connections';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;
type Row = Record<string, string | number>;
/** One measured figure at one size: latency percentiles (ms), or throughput (req/s) for /v1/track. */
interface Figure {
  p50: number;
  p99: number;
  rps?: number;
  note?: string;
}

const EMAILS_DELETED = 'emails deleted (+3 timeline rows each)';
const HISTORY_TABLES = ['emails', 'email_events', 'events', 'webhook_deliveries', 'webhook_attempts'];
const fmt = (n: number) => n.toLocaleString('en-US');
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** History tables that are partitioned (`pg_partitioned_table`): empty on today's schema. */
async function partitioned(database: Database): Promise<string[]> {
  const r = await database.db.execute<{ relname: string }>(sql`
    select c.relname from pg_partitioned_table p join pg_class c on c.oid = p.partrelid
    where c.relname = any(${`{${HISTORY_TABLES.join(',')}}`}::text[]) order by 1`);
  return r.rows.map((x) => x.relname);
}

async function timed(n: number, call: () => Promise<void>): Promise<Figure> {
  for (let i = 0; i < Math.min(5, n); i++) await call(); // warm-up: connections, prepared statements
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await call();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { p50: Number(pct(times, 50).toFixed(1)), p99: Number(pct(times, 99).toFixed(1)) };
}

/** The API figures at the current size (API in its own process, started and stopped here). */
async function measure(
  env: Record<string, string>,
  database: Database,
  f: HistoryFixture,
  keys: { secretKey: string; publicKey: string },
  spawnApp: Spawn,
  stop: (p: ChildProcess) => Promise<void>,
): Promise<Map<string, Figure>> {
  const port = await freePort();
  const api = spawnApp('apps/api/src/server.ts', { ...env, PORT: String(port), RATE_LIMIT_PER_MINUTE: '10000000' });
  const base = `http://127.0.0.1:${port}`;
  const out = new Map<string, Figure>();
  const call = apiCaller(base, keys.secretKey);
  try {
    await waitForHttp(`${base}/health/ready`, 30_000);
    const calls = Number(process.env.BENCH_HISTORY_CALLS ?? 200);
    out.set('GET /contacts (first page, 20)', await timed(calls, async () => void (await call('GET', '/contacts'))));
    out.set(
      'GET /contacts?subscribed=false (first page)',
      await timed(calls, async () => void (await call('GET', '/contacts?subscribed=false'))),
    );
    // Random emails: a block sample of the table, shuffled (sampled anew at each size, so most are cold).
    const sample = await database.db.execute<{ id: string }>(sql`
      select id from emails tablesample system (0.5) where project_id = ${f.projectId}::uuid order by random() limit ${calls + 5}`);
    const ids = sample.rows.map((r) => r.id);
    let next = 0;
    out.set(
      'GET /emails/{id} (random email, with timeline)',
      await timed(Math.min(calls, ids.length - 5), async () => {
        const e = await call('GET', `/emails/${ids[next++ % ids.length]}`);
        if (!Array.isArray(e.timeline) || e.timeline.length < 3)
          throw new Error(`email without its timeline: ${JSON.stringify(e).slice(0, 200)}`);
      }),
    );
    out.set(
      `GET /campaigns/{id}/stats (${fmt(f.contacts)} recipients)`,
      await timed(Math.ceil(calls / 4), async () => void (await call('GET', `/campaigns/${f.campaignId}/stats`))),
    );
    const previews: [string, unknown][] = [
      ['event.plan_upgraded exists (fixed cohort)', [{ field: 'event.plan_upgraded', operator: 'exists' }]],
      ['event.purchase exists', [{ field: 'event.purchase', operator: 'exists' }]],
      ['event.purchase count >= 2', [{ field: 'event.purchase', operator: 'greaterThanOrEqual', value: 2 }]],
      ['event.purchase within 30 days', [{ field: 'event.purchase', operator: 'within', value: 30, unit: 'days' }]],
    ];
    for (const [name, filter] of previews) {
      let matched = 0;
      const fig = await timed(Number(process.env.BENCH_HISTORY_PREVIEWS ?? 20), async () => {
        matched = (await call('POST', '/segments/preview', { filter })).count as number;
      });
      out.set(`POST /segments/preview: ${name}`, { ...fig, note: `${fmt(matched)} matched` });
    }
    let n = 0;
    const seconds = Number(process.env.BENCH_HISTORY_SECONDS ?? 5);
    const track = await autocannon({
      url: `${base}/v1/track`,
      connections: 10,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          headers: { authorization: `Bearer ${keys.publicKey}`, 'content-type': 'application/json' },
          setupRequest: (req) => {
            const i = n++;
            return {
              ...req,
              body: JSON.stringify({
                email: `h${(i * 7919) % f.contacts}@bench.test`,
                event: 'page_view',
                data: { path: `/docs/${i % 40}` },
              }),
            };
          },
        },
      ],
    });
    if (track.non2xx > 0 || track.errors > 0)
      throw new Error(`/v1/track: ${track.non2xx} non-2xx, ${track.errors} errors`);
    out.set(`POST /v1/track (10 connections, ${seconds} s)`, {
      p50: track.latency.p50,
      p99: track.latency.p99,
      rps: Math.round(track.requests.average),
    });
  } finally {
    await stop(api);
  }
  return out;
}

/** `table: rows` for every partitioned history table whose default partition holds rows (none is expected). */
async function defaultPartitionRows(database: Database, tables: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const t of tables) {
    const r = await database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from ${sql.identifier(`${t}_default`)}`,
    );
    if (r.rows[0].n > 0) out.push(`${t}: ${r.rows[0].n}`);
  }
  return out;
}

/**
 * With BENCH_HISTORY_LOCK set to a file, holds an exclusive `flock(1)` on it while measuring and dropping (not while
 * filling, which takes most of the run), so that other heavy jobs sharing the lock stay off the measured minutes.
 * Resolves once the lock is held; the returned function releases it.
 */
async function quietLock(): Promise<() => void> {
  const file = process.env.BENCH_HISTORY_LOCK;
  if (!file) return () => undefined;
  const holder = spawn('flock', [file, 'sh', '-c', 'echo locked; read _'], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('exit', (code) => reject(new Error(`flock ${file} exited (${code})`)));
  });
  console.log(`holding ${file} while measuring`);
  return () => void holder.stdin.end();
}

/** Row counts of the history tables (exact). */
async function counts(database: Database): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of HISTORY_TABLES)
    out[t] = (
      await database.db.execute<{ n: number }>(sql`select count(*)::int as n from ${sql.identifier(t)}`)
    ).rows[0].n;
  return out;
}

/** One day (ms). */
const DAY = 86_400_000;

/**
 * The retention (whole days) that expires the oldest calendar months of the fill: the partial month the fill starts
 * in and the first whole one after it. Partitions are calendar months (UTC), so a cutoff at a month's end lets the
 * pass drop both months' partitions (the cutoff falls less than a day into the next month, whose few older rows
 * go in batches).
 */
function daysToCalendarMonthEnd(t0: number): number {
  return Math.floor((Date.now() - oldestMonthsEnd(t0)) / DAY);
}

/** The end (ms) of the oldest calendar months of the fill that a month drop expires: the first of the month after them. */
function oldestMonthsEnd(t0: number): number {
  const oldest = new Date(months(t0)[11].from);
  return Date.UTC(oldest.getUTCFullYear(), oldest.getUTCMonth() + 2, 1);
}

/**
 * One retention pass that expires the oldest month of emails and events: on today's partitioned schema the oldest
 * calendar months (see {@link daysToCalendarMonthEnd}), else the oldest 30-day month of the fill (330 days). Wall
 * time and what it did (rows removed counted before and after, outside the timing).
 */
async function dropOldestMonth(config: Config, database: Database, f: HistoryFixture): Promise<Row> {
  const path = await partitioned(database);
  const days = path.length > 0 ? daysToCalendarMonthEnd(f.t0) : 330;
  const before = await counts(database);
  await updateProjectRetention(database.db, f.projectId, { emailDays: days, eventDays: days });
  const probe = await probeHistoryReads(database);
  const t = performance.now();
  const r = await runRetentionPass(
    { config, database, logger: createLogger(config, 'bench') },
    { budgetMs: 24 * 3_600_000, startAt: 0 },
  ).finally(() => probe.stop());
  const ms = performance.now() - t;
  const stalls = await probe.done;
  await updateProjectRetention(database.db, f.projectId, { emailDays: null, eventDays: null });
  const after = await counts(database);
  const removed = (t: string) => before[t] - after[t];
  const rows = removed('emails') + removed('events');
  return {
    path:
      path.length > 0
        ? `partitioned (${path.join(', ')}): retention ${days} days, ${r.partitionsDropped.length} partitions dropped`
        : 'batched deletes (no partitioned table): retention 330 days',
    [EMAILS_DELETED]: removed('emails'),
    'events deleted': removed('events'),
    'other kinds changed':
      Object.entries(r.counts)
        .filter(([k, v]) => k !== 'emails' && k !== 'events' && v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none',
    statements: r.batches,
    'time (s)': Number((ms / 1000).toFixed(2)),
    'partitions (s)': Number((r.partitionMs / 1000).toFixed(2)),
    'batches after them (s)': Number(((ms - r.partitionMs) / 1000).toFixed(2)),
    'emails+events /s': Math.round(rows / (ms / 1000)),
    'reads meanwhile: n, p50 / max ms': `${stalls.n}, ${stalls.p50} / ${stalls.max}`,
  };
}

/**
 * What the hot path feels of a month drop: from one connection of its own, reads of the current month of `emails`
 * and of `events` by id, one after the other, for as long as the drop runs. A query naming a partitioned table locks
 * the parent, so each read waits for as long as a detach (or anything else in the drop) holds the parent's ACCESS
 * EXCLUSIVE lock. `done` resolves with the number of reads and their p50 and longest latency (ms).
 */
async function probeHistoryReads(
  database: Database,
): Promise<{ stop(): void; done: Promise<{ n: number; p50: number; max: number }> }> {
  const client = await database.pool.connect();
  let running = true;
  const done = (async () => {
    const ms: number[] = [];
    try {
      for (let i = 0; running; i++) {
        const t = performance.now();
        await client.query(`select 1 from ${i % 2 === 0 ? 'emails' : 'events'} where id = $1::uuid`, [idOfNow()]);
        ms.push(performance.now() - t);
      }
    } finally {
      client.release();
    }
    ms.sort((a, b) => a - b);
    const round = (x: number | undefined) => Number((x ?? 0).toFixed(1));
    return { n: ms.length, p50: round(pct(ms, 50)), max: round(ms[ms.length - 1]) };
  })();
  return { stop: () => void (running = false), done };
}

/** A UUIDv7-shaped id of the current millisecond (random bits zero): a lookup in this month's partition. */
function idOfNow(): string {
  const h = Date.now().toString(16).padStart(12, '0');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-7000-8000-000000000000`;
}

/** Runs the history benchmark; returns the printed rows. */
export async function benchHistory(
  env: Record<string, string>,
  database: Database,
  project: { id: string; secretKey: string; publicKey: string; domain: string },
  spawnApp: Spawn,
  stop: (p: ChildProcess) => Promise<void>,
): Promise<Record<string, unknown>> {
  const rows = Number(process.env.BENCH_HISTORY_ROWS ?? 1_000_000);
  const growth = Number(process.env.BENCH_HISTORY_GROWTH ?? 10);
  const contacts = Math.min(Number(process.env.BENCH_HISTORY_CONTACTS ?? 100_000), Math.floor(rows / 10));
  const config = loadConfig(env);
  const { db } = database;
  const log = (line: string) => console.log(line);
  const results: Record<string, unknown> = { date: new Date().toISOString(), rows, growth, contacts };
  const pathBefore = await partitioned(database);
  console.log(`history tables partitioned: ${pathBefore.length > 0 ? pathBefore.join(', ') : "none (today's schema)"}`);

  // Give every partitioned table its months first (a year back, as the migration does for rows it finds), so the
  // fixture's and the fills' rows land in their month and not in the default partition (which the checks below
  // require to stay empty). The fills refill the months a drop removed, so this runs again before each size.
  const ensureMonths = async () => {
    for (const table of pathBefore) {
      await db.execute(
        sql`select mailroom_ensure_month_partitions(${table}, now() - interval '13 months', now() + interval '3 months')`,
      );
    }
  };
  await ensureMonths();
  let t = performance.now();
  const f = await createFixture(database, project, contacts, Date.now());
  console.log(
    `fixture: ${fmt(contacts)} contacts, a SENT campaign to all of them, a webhook endpoint in ${((performance.now() - t) / 1000).toFixed(1)} s`,
  );

  const sizes = [rows, rows * growth];
  const figures: Map<string, Figure>[] = [];
  const drops: Row[] = [];
  const sameDrops: Row[] = [];
  const fills: Row[] = [];
  for (const size of sizes) {
    console.log(`\nfilling to ${fmt(size)} emails and ${fmt(size)} events`);
    await ensureMonths();
    const added = await fillTo(database, f, size, log);
    const stray = await defaultPartitionRows(database, pathBefore);
    if (stray.length > 0) throw new Error(`rows in default partitions (a month was missing): ${stray.join(', ')}`);
    t = performance.now();
    // What autovacuum does to insert-only tables after a bulk load (visibility map for index-only scans, statistics).
    for (const table of ['contacts', ...HISTORY_TABLES])
      await db.execute(sql`vacuum (analyze) ${sql.identifier(table)}`);
    const vacuumMs = performance.now() - t;
    // Measure from a finished checkpoint, not in the middle of the one the fill and vacuum left running.
    await db.execute(sql`checkpoint`).catch(() => undefined);
    const c = await counts(database);
    fills.push({
      size: fmt(size),
      'emails added': added.emails,
      'events added': added.events,
      'webhook deliveries added': added.webhooks,
      'fill (s)': Number((added.ms / 1000).toFixed(1)),
      'rows/s (emails+timeline+events+webhooks)': Math.round(
        (added.emails * 4 + added.events + added.webhooks * 2) / (added.ms / 1000),
      ),
      'vacuum analyze (s)': Number((vacuumMs / 1000).toFixed(1)),
      ...Object.fromEntries(Object.entries(c).map(([k, v]) => [k, v])),
    });
    console.table([fills[fills.length - 1]]);
    const release = await quietLock();
    const m = await measure(env, database, f, project, spawnApp, stop);
    figures.push(m);
    console.log(`\nAt ${fmt(size)} emails and events:`);
    console.table(
      [...m].map(([k, v]) => ({
        measure: k,
        'p50 ms': v.p50,
        'p99 ms': v.p99,
        ...(v.rps ? { 'req/s': v.rps } : {}),
        ...(v.note ? { note: v.note } : {}),
      })),
    );
    if (size === sizes[sizes.length - 1]) results.sizing = await historySizing(database);
    try {
      drops.push({ size: fmt(size), ...(await dropOldestMonth(config, database, f)) });
      console.log('\nDropping the oldest month (one retention pass):');
      console.table([drops[drops.length - 1]]);
      // The same month again: the dropped months refilled with exactly the rows the smallest size's drop removed, then
      // dropped again, so both sizes free the same bytes with ten times the history around them at the larger one.
      if (pathBefore.length > 0) {
        await ensureMonths();
        const refillMs = await addHistory(
          database,
          f,
          months(f.t0)[11].from,
          oldestMonthsEnd(f.t0) - 3_600_000,
          Number(drops[0][EMAILS_DELETED]),
          Number(drops[0]['events deleted']),
        );
        await db.execute(sql`checkpoint`).catch(() => undefined);
        sameDrops.push({
          size: fmt(size),
          'refill (s)': Number((refillMs / 1000).toFixed(1)),
          ...(await dropOldestMonth(config, database, f)),
        });
        console.log("\nThe same month again (refilled with the first size's dropped rows, dropped again):");
        console.table([sameDrops[sameDrops.length - 1]]);
      }
    } finally {
      release();
    }
  }

  const [a, b] = figures;
  const label = (n: number) => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`);
  const [la, lb] = sizes.map(label);
  const comparison: Row[] = [...a.keys()].map((k) => {
    const x = a.get(k)!;
    const y = b.get(k)!;
    const row: Row = {
      measure: k,
      [`${la} p50/p99 ms`]: `${x.p50} / ${x.p99}`,
      [`${lb} p50/p99 ms`]: `${y.p50} / ${y.p99}`,
      'ratio p50': (y.p50 / x.p50).toFixed(2),
      'ratio p99': (y.p99 / x.p99).toFixed(2),
    };
    if (x.rps && y.rps) row['req/s'] = `${x.rps} → ${y.rps} (${(y.rps / x.rps).toFixed(2)}×)`;
    return row;
  });
  // The pass drops the expired months' partitions, then deletes in batches the rows of the under-a-day between the
  // last dropped month's end and the cutoff (retention is whole days from now; months are calendar months): that
  // part is a day of traffic, so it grows with the traffic per day, which the bench multiplies by the growth.
  const dropRow = (measure: string, key: string, d = drops) => ({
    measure,
    [`${la} p50/p99 ms`]: `${d[0][key]} s`,
    [`${lb} p50/p99 ms`]: `${d[1][key]} s`,
    'ratio p50': (Number(d[1][key]) / Number(d[0][key])).toFixed(2),
    'ratio p99': '',
  });
  comparison.push(
    dropRow('drop the oldest month: its partitions', 'partitions (s)'),
    dropRow('drop the oldest month: then the rows of the day past its end (batches)', 'batches after them (s)'),
    dropRow('drop the oldest month: the whole retention pass', 'time (s)'),
    {
      measure: 'during the drop: reads of emails/events by id (n, p50 / max ms)',
      [`${la} p50/p99 ms`]: String(drops[0]['reads meanwhile: n, p50 / max ms']),
      [`${lb} p50/p99 ms`]: String(drops[1]['reads meanwhile: n, p50 / max ms']),
      'ratio p50': '',
      'ratio p99': '',
    },
    ...(sameDrops.length === 2
      ? [
          dropRow(
            `the same month again (${drops[0][EMAILS_DELETED]} emails, ${drops[0]['events deleted']} events at both sizes): its partitions`,
            'partitions (s)',
            sameDrops,
          ),
          dropRow('the same month again: the whole retention pass', 'time (s)', sameDrops),
        ]
      : []),
  );
  console.log(`\nHistory growth ${la} → ${lb} (goal: ratio ≤ 1.3; dropping a month: the same time at both sizes)`);
  console.table(comparison);
  Object.assign(results, { fills, drops, sameDrops, comparison });

  if (process.env.BENCH_HISTORY_CONNECTIONS !== '0')
    results.connections = await countConnections(env, database, project, spawnApp, stop);
  await db.execute(sql`drop table if exists bench_history_contacts`);
  return results;
}
