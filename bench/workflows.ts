/**
 * `npm run bench -- workflows`: trigger events through `POST /v1/track` (API in its own process, 10 connections),
 * each for a new contact, on workflows `track → UPDATE_CONTACT → EXIT`:
 * 1. `/v1/track` with no workflow on the event name, then with one, the worker stopped: the request only inserts
 *    the event and, by trigger, an inbox row; nothing of the workflow runs in it.
 * 2. A worker process started on that burst (BENCH_WORKFLOW_EVENTS, default 10,000, waiting in the inbox):
 *    executions started per second and finished per second.
 *    BENCH_PROFILE=<dir> writes the worker's CPU profile there.
 * 3. A steady 100 events/s (BENCH_WORKFLOW_RATE) for 30 s with the worker running: lag from an event's commit to
 *    its first step's start (p50/p95/p99/max), read from the rows.
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { sql } from 'drizzle-orm';
import type { Config } from '@mailroom/config/config';
import { createWorkflow, insertStep, insertTransition, updateWorkflow } from '@mailroom/workflows/queries/workflows';
import { type Database } from '@mailroom/db/client';
import { freePort, waitForHttp } from '../test/support/services';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;

async function track(port: number, key: string, total: number, event: string, tag: string, overallRate?: number) {
  let next = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/v1/track`,
    connections: 10,
    amount: total,
    ...(overallRate ? { overallRate } : {}),
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        setupRequest: (req) => ({
          ...req,
          body: JSON.stringify({ email: `wf${next++}-${tag}@bench.test`, event, data: { plan: 'pro' } }),
        }),
      },
    ],
  });
  return `${Math.round(result.requests.total / (result.duration || 1))} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}`;
}

/** A disabled workflow `event → UPDATE_CONTACT → EXIT`. */
async function benchWorkflow(database: Database, projectId: string, event: string): Promise<string> {
  const { db } = database;
  const w = await createWorkflow(db, projectId, { name: event, triggerType: 'EVENT', triggerEvent: event });
  const update = await insertStep(db, projectId, w.id, {
    type: 'UPDATE_CONTACT',
    name: 'tag',
    config: { data: { welcomed: true } },
  });
  const exit = await insertStep(db, projectId, w.id, { type: 'EXIT', name: 'done', config: { reason: 'bench' } });
  await insertTransition(db, projectId, w.id, { fromStepId: null, toStepId: update.id, branch: 'next' });
  await insertTransition(db, projectId, w.id, { fromStepId: update.id, toStepId: exit.id, branch: 'next' });
  return w.id;
}

async function waitExited(database: Database, workflowId: string, total: number): Promise<void> {
  const deadline = Date.now() + 900_000;
  for (;;) {
    const r = await database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from workflow_executions where workflow_id = ${workflowId}::uuid and status = 'EXITED'`,
    );
    if (r.rows[0].n >= total || Date.now() > deadline) return;
    await new Promise((res) => setTimeout(res, 200));
  }
}

async function stats(database: Database, workflowId: string) {
  const r = await database.db.execute<Record<string, number>>(sql`
    with x as (
      select x.created_at as started, x.finished_at, e.created_at as event_at, r.started_at as first_step_at
      from workflow_executions x
      join events e on e.id = x.trigger_event_id
      left join workflow_step_runs r on r.execution_id = x.id and r.version = 0
      where x.workflow_id = ${workflowId}::uuid
    )
    select count(*)::int as executions,
      count(*) filter (where finished_at is not null)::int as finished,
      extract(epoch from max(started) - min(started))::float8 as start_span_s,
      extract(epoch from max(finished_at) - min(started))::float8 as finish_span_s,
      percentile_cont(0.5) within group (order by extract(epoch from first_step_at - event_at) * 1000) as p50,
      percentile_cont(0.95) within group (order by extract(epoch from first_step_at - event_at) * 1000) as p95,
      percentile_cont(0.99) within group (order by extract(epoch from first_step_at - event_at) * 1000) as p99,
      max(extract(epoch from first_step_at - event_at) * 1000) as max
    from x
  `);
  return r.rows[0];
}

/** Runs the benchmark and prints its table. @returns the rows. */
export async function benchWorkflows(
  env: Record<string, string>,
  _config: Config,
  database: Database,
  p: { id: string; domain: string; secretKey: string },
  spawnApp: Spawn,
  stop: (c: ChildProcess) => Promise<void>,
): Promise<Record<string, string | number>[]> {
  const total = Number(process.env.BENCH_WORKFLOW_EVENTS ?? 10_000);
  const burstWf = await benchWorkflow(database, p.id, 'bench.signup');
  const steadyWf = await benchWorkflow(database, p.id, 'bench.steady');
  const port = await freePort();
  const api = spawnApp('apps/api/src/server.ts', { ...env, PORT: String(port), RATE_LIMIT_PER_MINUTE: '10000000' });
  await waitForHttp(`http://127.0.0.1:${port}/health/ready`, 30_000);
  const rows: Record<string, string | number>[] = [];
  let worker: ChildProcess | undefined;
  try {
    const tag = Date.now().toString(36);
    rows.push({
      measure: `/v1/track, no workflow on the event (${total} new contacts, worker stopped)`,
      value: await track(port, p.secretKey, total, 'bench.browse', `b${tag}`),
    });
    await updateWorkflow(database.db, p.id, burstWf, { enabled: true });
    rows.push({
      measure: `/v1/track, each event starts an execution (${total} new contacts, worker stopped)`,
      value: await track(port, p.secretKey, total, 'bench.signup', `s${tag}`),
    });

    const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
    worker = spawnApp('apps/worker/src/main.ts', { ...env, WORKER_HEALTH_PORT: '0' }, profile);
    await waitExited(database, burstWf, total);
    const b = await stats(database, burstWf);
    rows.push({
      measure: `burst waiting in the inbox: executions started (one per event)`,
      value: `${b.executions} of ${total}, ${b.finished} finished`,
    });
    rows.push({
      measure: 'burst: executions started per second (first → last created)',
      value: `${Math.round(b.executions / b.start_span_s)} /s over ${b.start_span_s.toFixed(1)} s`,
    });
    rows.push({
      measure: 'burst: executions finished per second (first created → last EXITED; 2 steps each)',
      value: `${Math.round(b.finished / b.finish_span_s)} /s over ${b.finish_span_s.toFixed(1)} s`,
    });

    await updateWorkflow(database.db, p.id, steadyWf, { enabled: true });
    const rate = Number(process.env.BENCH_WORKFLOW_RATE ?? 100);
    const steady = rate * 30;
    rows.push({
      measure: `/v1/track at a steady ${rate} events/s (${steady}), worker running`,
      value: await track(port, p.secretKey, steady, 'bench.steady', `t${tag}`, rate),
    });
    await waitExited(database, steadyWf, steady);
    const s = await stats(database, steadyWf);
    rows.push({
      measure: `steady ${rate}/s: lag event → first step started, p50 / p95 / p99 / max`,
      value: `${Math.round(s.p50)} / ${Math.round(s.p95)} / ${Math.round(s.p99)} / ${Math.round(s.max)} ms`,
    });
  } finally {
    await stop(api);
    if (worker) await stop(worker);
  }
  console.log(
    `\nWorkflows (API and one worker, each in its own process, on 2 cores shared with Postgres, Redis and the load generator)`,
  );
  console.table(rows);
  return rows;
}
