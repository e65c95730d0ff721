/**
 * Chaos: a worker SIGKILLed again and again while a batch of 150 emails drains. Each cycle starts a worker
 * process, lets it send a dozen, and kills it with no warning (no graceful shutdown, jobs and claims left
 * behind); after six kills one worker finishes the batch.
 *
 * Survived means: every email delivered; a message sent twice only where a worker was killed holding its claim
 * (SES has no idempotency key: a message on the wire at the kill may have been accepted, and the next worker,
 * taking the claim after its lease, sends it again with the same Message-ID). Workers run one job at a time here,
 * so that is at most one message per kill.
 */
import { inArray } from 'drizzle-orm';
import request from 'supertest';
import { loadConfig } from '@mailroom/config/config';
import { emails } from '@mailroom/db/schema/emails';
import { createTestProject, exited, isolatedDatabase, recipient, sesSendsTo, spawnWorker, startTestApi, testEnv, waitFor, type TestApi } from '../support/harness';
import { statusCounts, survival } from './survival';

const EMAILS = 150;
const KILLS = 6;
const SENDS_PER_LIFE = 12;

describe('a worker SIGKILLed in a loop while a batch drains', () => {
  let iso: { url: string; drop: () => Promise<void> };
  let api: TestApi;
  const children: Array<ReturnType<typeof spawnWorker>> = [];
  const env: Record<string, string> = {};

  beforeAll(async () => {
    iso = await isolatedDatabase();
    Object.assign(
      env,
      testEnv({
        DATABASE_URL: iso.url,
        SES_MAX_SEND_RATE: '40',
        // One job at a time: at most one message is on its way to SES when the kill lands.
        WORKER_CONCURRENCY: '1',
        // A dead worker's job is found stalled, and its claim freed, within about 2 s.
        WORKER_LOCK_MS: '2000',
        SEND_LEASE_MS: '2000',
        RECONCILE_INTERVAL_MS: '1000',
        RECONCILE_AFTER_MS: '3000',
      }),
    );
    api = await startTestApi(loadConfig(env));
  });

  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map(exited));
    await api?.close();
    await iso?.drop();
  });

  test(`${EMAILS} emails, ${KILLS} kills: every email delivered, at most one duplicate per kill`, async () => {
    const p = await createTestProject(api.database);
    const to = Array.from({ length: EMAILS }, () => recipient('wkill'));
    const ids: string[] = [];
    for (let i = 0; i < EMAILS; i += 100) {
      const res = await request(api.app).post('/v1/send').set('Authorization', p.auth).send({ to: to.slice(i, i + 100), from: `k@${p.domain}`, subject: 'kill', body: '<p>kill</p>' });
      expect(res.status).toBe(202);
      ids.push(...res.body.data.emails.map((e: { email: string }) => e.email));
    }
    const atSes = async () => (await sesSendsTo(to)).length;

    const kills: Array<{ at: number; sentBefore: number; held: string[] }> = [];
    for (let k = 0; k < KILLS; k++) {
      const before = await atSes();
      const worker = spawnWorker(env);
      children.push(worker);
      await waitFor(async () => (await atSes()) >= before + SENDS_PER_LIFE || worker.exitCode !== null || undefined, 60_000, `worker ${k + 1} to send ${SENDS_PER_LIFE}`);
      expect(worker.exitCode).toBeNull(); // it was running, not crashed, when we killed it
      const at = Date.now();
      worker.kill('SIGKILL');
      await exited(worker);
      // No worker is alive now: every row still `sending` is a claim a killed worker left behind.
      const held = (await api.database.db.select({ id: emails.id, status: emails.status }).from(emails).where(inArray(emails.id, ids)))
        .filter((r) => r.status === 'sending')
        .map((r) => r.id);
      kills.push({ at, sentBefore: await atSes(), held });
    }
    expect(kills[kills.length - 1].sentBefore).toBeLessThan(EMAILS); // the batch was still draining at the last kill

    const last = spawnWorker(env);
    children.push(last);
    await waitFor(async () => (await statusCounts(api.database, ids)).sent === EMAILS || undefined, 60_000, `all ${EMAILS} sent`).catch(async (err) => {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(await statusCounts(api.database, ids))}\nworker:\n${last.output.slice(-30).join('\n')}`);
    });
    expect(last.exitCode).toBeNull();

    const s = await survival(to, ids);
    const heldAtSomeKill = new Set(kills.flatMap((k) => k.held));
    console.log(
      `chaos worker-kill: ${EMAILS} emails, ${KILLS} SIGKILLs (SES sends before each: ${kills.map((k) => k.sentBefore).join(', ')}; ` +
        `kills that left a claim behind: ${kills.filter((k) => k.held.length > 0).length}); ` +
        `emails delivered ${s.delivered}, lost ${s.lost.length}, duplicated ${s.duplicated.length} (allowed: at most ${KILLS}, one per kill)`,
    );
    expect(s.lost).toEqual([]);
    // Only a claim a killed worker held can reach SES twice, and never more than twice.
    expect(s.duplicated.filter((id) => !heldAtSomeKill.has(id))).toEqual([]);
    expect(Math.max(...s.copies.values())).toBeLessThanOrEqual(2);
    expect(s.duplicated.length).toBeLessThanOrEqual(KILLS);
    // Per kill, counting only the claims that kill left (a claim an earlier kill left may still be held).
    const seen = new Set<string>();
    for (const k of kills) {
      const fresh = k.held.filter((id) => !seen.has(id));
      k.held.forEach((id) => seen.add(id));
      expect(fresh.filter((id) => s.duplicated.includes(id)).length).toBeLessThanOrEqual(1);
    }
  }, 180_000);
});
