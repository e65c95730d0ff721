/**
 * What the chaos tests count: for a set of accepted emails, how many reached SES, how many never did and how
 * many more than once, read from the SES recorder (by each send's `email_id` tag), and the final statuses
 * in Postgres.
 */
import net from 'node:net';
import { inArray } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { type Database } from '@mailroom/db/client';
import type { ChildProcess } from 'node:child_process';
import { exited, sesEmailIds, spawnWorker, waitFor } from '../support/harness';

/** Email id → SES copies accepted (status 200) for the given recipients (`sentEmailId`). */
export async function sesCopies(addresses: string[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const id of await sesEmailIds(addresses)) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** Delivered, lost and duplicated among `ids` (accepted email ids), per the SES record. */
export async function survival(
  addresses: string[],
  ids: string[],
): Promise<{ delivered: number; lost: string[]; duplicated: string[]; copies: Map<string, number> }> {
  const copies = await sesCopies(addresses);
  const lost = ids.filter((id) => !copies.has(id));
  const duplicated = ids.filter((id) => (copies.get(id) ?? 0) > 1);
  return { delivered: ids.length - lost.length, lost, duplicated, copies };
}

/** Status → count of the given emails' rows. */
export async function statusCounts(database: Database, ids: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await database.db
      .select({ status: emails.status })
      .from(emails)
      .where(inArray(emails.id, ids.slice(i, i + 500)));
    for (const r of rows) out[r.status] = (out[r.status] ?? 0) + 1;
  }
  return out;
}

/** Answers whether a Redis server answers PING on loopback `port` (within 1 s). */
export function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

/** One kill of {@link killLoop}: when, SES's sends before it, and the claims the killed worker left behind. */
export interface Kill {
  at: number;
  sentBefore: number;
  held: string[];
}

/**
 * `kills` times: starts a worker (`env`), waits until SES has `sendsPerLife` more messages (`atSes`), SIGKILLs it
 * and records the claims it held: the rows of `claims()` still `sending` with a claim token no earlier kill saw (a
 * claim an earlier kill left, not yet taken over, is not this worker's). No worker is alive at that moment, so every
 * row still `sending` is a claim a killed worker left behind. `afterKill` runs after each kill's record.
 *
 * @returns the kills in order; the started workers are pushed onto `children` (the caller kills them at the end).
 */
export async function killLoop(o: {
  env: Record<string, string>;
  kills: number;
  sendsPerLife: number;
  atSes: () => Promise<number>;
  claims: () => Promise<{ id: string; status: string; token: string | null }[]>;
  children: ChildProcess[];
  afterKill?: () => Promise<void>;
}): Promise<Kill[]> {
  const kills: Kill[] = [];
  const claimsSeen = new Set<string>();
  for (let k = 0; k < o.kills; k++) {
    const before = await o.atSes();
    const worker = spawnWorker(o.env);
    o.children.push(worker);
    await waitFor(
      async () => (await o.atSes()) >= before + o.sendsPerLife || worker.exitCode !== null || undefined,
      60_000,
      `worker ${k + 1} to send ${o.sendsPerLife}`,
    );
    expect(worker.exitCode).toBeNull(); // it was running, not crashed, when it was killed
    const at = Date.now();
    worker.kill('SIGKILL');
    await exited(worker);
    const held = (await o.claims())
      .filter((r) => r.status === 'sending' && !claimsSeen.has(`${r.id}:${r.token}`))
      .map((r) => {
        claimsSeen.add(`${r.id}:${r.token}`);
        return r.id;
      });
    kills.push({ at, sentBefore: await o.atSes(), held });
    await o.afterKill?.();
  }
  return kills;
}

/**
 * What the kills cost, per the SES record `copies` (email id → copies): the copies beyond the first of each email,
 * with how many of the kills held its claim (`allowed`: each such kill may have caught it on the wire), the claims
 * held at each kill, and how many of those reached SES more than once.
 */
export function resends(kills: readonly Kill[], copies: ReadonlyMap<string, number>) {
  const killsHolding = new Map<string, number>();
  for (const k of kills) for (const id of k.held) killsHolding.set(id, (killsHolding.get(id) ?? 0) + 1);
  const extra = [...copies.entries()]
    .filter(([, n]) => n > 1)
    .map(([id, n]) => ({ id, extra: n - 1, allowed: killsHolding.get(id) ?? 0 }));
  return {
    extra,
    extraCopies: extra.reduce((sum, e) => sum + e.extra, 0),
    inFlight: kills.map((k) => k.held.length),
    resentPerKill: kills.map((k) => k.held.filter((id) => (copies.get(id) ?? 0) > 1).length),
  };
}
