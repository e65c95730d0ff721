/**
 * Chaos: a worker SIGKILLed again and again while a batch of emails drains. Each cycle starts a worker process
 * running WORKER_CONCURRENCY send jobs at once, lets it send a few dozen, and kills it with no warning (no graceful
 * shutdown, jobs and claims left behind); after six kills one worker finishes the batch.
 *
 * Survived means: every email delivered; a message sent again only where a worker was killed holding its claim
 * (SES has no idempotency key: a message on the wire at the kill may have been accepted, and the next worker,
 * taking the claim after its lease, sends it again with the same Message-ID). So the duplicates of one kill are
 * at most the sends in flight at the kill (the claims the killed worker held), which are at most the worker's
 * concurrency: not one per kill, as soon as a worker sends more than one message at a time. A message in flight
 * at two kills may reach SES three times; never more often than once plus the kills that caught it in flight.
 */
import { inArray } from 'drizzle-orm';
import request from 'supertest';
import { emails } from '@mailroom/db/schema/emails';
import { createTestProject, recipient, sesSendsTo, spawnWorker, waitFor } from '../support/harness';
import { useWorkerProcesses } from '../support/worker-processes';
import { killLoop, resends, statusCounts, survival } from './survival';
import { toSummary } from '../support/summary';

const EMAILS = 600;
const KILLS = 6;
const SENDS_PER_LIFE = 40;
/** Send jobs each worker runs at once (the default): the most claims, so the most uncertain sends, a kill can leave. */
const CONCURRENCY = 8;

describe('a worker SIGKILLed in a loop while a batch drains', () => {
  const workers = useWorkerProcesses({
    // Fast enough that several sends overlap, as in production, where the report saw 2 and 3 re-sent after one kill.
    SES_MAX_SEND_RATE: '100',
    WORKER_CONCURRENCY: String(CONCURRENCY),
    // A dead worker's job is found stalled, and its claim freed, within about 2 s.
    WORKER_LOCK_MS: '2000',
    SEND_LEASE_MS: '2000',
    RECONCILE_INTERVAL_MS: '1000',
    RECONCILE_AFTER_MS: '3000',
  });
  const { env, children } = workers;

  test(`${EMAILS} emails, ${KILLS} kills: every email delivered, duplicates per kill at most the sends in flight (<= ${CONCURRENCY})`, async () => {
    const p = await createTestProject(workers.api.database);
    const to = Array.from({ length: EMAILS }, () => recipient('wkill'));
    const ids: string[] = [];
    for (let i = 0; i < EMAILS; i += 100) {
      const res = await request(workers.api.app)
        .post('/v1/send')
        .set('Authorization', p.auth)
        .send({ to: to.slice(i, i + 100), from: `k@${p.domain}`, subject: 'kill', body: '<p>kill</p>' });
      expect(res.status).toBe(202);
      ids.push(...res.body.data.emails.map((e: { email: string }) => e.email));
    }
    const atSes = async () => (await sesSendsTo(to)).length;

    const claims = () =>
      workers.api.database.db
        .select({ id: emails.id, status: emails.status, token: emails.claimToken })
        .from(emails)
        .where(inArray(emails.id, ids));
    const kills = await killLoop({ env, kills: KILLS, sendsPerLife: SENDS_PER_LIFE, atSes, claims, children });
    expect(kills[kills.length - 1].sentBefore).toBeLessThan(EMAILS); // the batch was still draining at the last kill

    const last = spawnWorker(env);
    children.push(last);
    await waitFor(
      async () => (await statusCounts(workers.api.database, ids)).sent === EMAILS || undefined,
      60_000,
      `all ${EMAILS} sent`,
    ).catch(async (err) => {
      throw new Error(
        `${(err as Error).message}: ${JSON.stringify(await statusCounts(workers.api.database, ids))}\nworker:\n${last.output.slice(-30).join('\n')}`,
      );
    });
    expect(last.exitCode).toBeNull();

    const s = await survival(to, ids);
    // Each copy beyond the first needs a kill that caught the email in flight: per email, at most one per such kill.
    const { extra, extraCopies, inFlight, resentPerKill } = resends(kills, s.copies);
    toSummary(
      `chaos worker-kill: ${EMAILS} emails, ${KILLS} SIGKILLs of workers running ${CONCURRENCY} sends at once (SES sends before each: ` +
        `${kills.map((k) => k.sentBefore).join(', ')}; sends in flight at each: ${inFlight.join(', ')}, of them sent again: ${resentPerKill.join(', ')}); ` +
        `emails delivered ${s.delivered}, lost ${s.lost.length}, duplicated ${s.duplicated.length} (${extraCopies} extra copies; ` +
        `allowed: at most the sends in flight at the kills, ${inFlight.reduce((a, b) => a + b, 0)}, each kill <= ${CONCURRENCY})`,
    );
    expect(s.lost).toEqual([]);
    // A worker holds one claim per send job it runs: the sends in flight at a kill are at most its concurrency.
    for (const n of inFlight) expect(n).toBeLessThanOrEqual(CONCURRENCY);
    // Only a claim a killed worker held reaches SES again, once per kill that caught it in flight at most.
    expect(extra.filter((e) => e.extra > e.allowed)).toEqual([]);
    expect(extraCopies).toBeLessThanOrEqual(inFlight.reduce((a, b) => a + b, 0));
  }, 180_000);
});
