/**
 * The worker's Prometheus metrics on its health port: send outcomes (sent, failed, throttled), SES latency by
 * outcome, the send-rate gate's waits, queue depths per queue and state, the Postgres pools' connections, and every
 * metric family announced.
 */
import { client, createTestProject, recipient, sesFault, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';

// One SES call per email (SES_BULK_COALESCE off): at 50/s two of these sends ready in the same turn could share a
// call, and the per-call series (latency, gate waits) would then count calls, not these emails.
const e2e = useE2e({ env: { SES_MAX_SEND_RATE: '50', SES_BULK_COALESCE: 'false' }, worker: { healthPort: 0 } });

const scrape = async () => (await fetch(`http://127.0.0.1:${e2e.worker.healthPort}/metrics`)).text();
const value = (text: string, series: string) =>
  Number(new RegExp(`^${series.replace(/[{}"()+.]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

test('send outcomes, SES latency, gate waits and queue depths are exported', async () => {
  const p = await createTestProject(e2e.api.database);
  const [ok, throttled, rejected] = [recipient('m-ok'), recipient('m-throttle'), recipient('m-reject')];
  await sesFault({
    match: throttled,
    status: 429,
    type: 'TooManyRequestsException',
    message: 'Maximum sending rate exceeded.',
    times: 1,
  });
  await sesFault({
    match: rejected,
    status: 400,
    type: 'MessageRejected',
    message: 'Email address is not verified.',
    times: 1,
  });
  for (const to of [ok, throttled, rejected]) {
    expect(
      (await client(e2e.api.app, p).post('/v1/send', { to, from: `m@${p.domain}`, subject: 's', body: 'b' })).status,
    ).toBe(202);
  }
  const text = await waitFor(
    async () => {
      const t = await scrape();
      return (
        value(t, 'mailroom_emails_total{outcome="sent"}') === 2 &&
        value(t, 'mailroom_emails_total{outcome="failed"}') === 1 &&
        t
      );
    },
    30_000,
    'two sent and one failed',
  );
  expect(value(text, 'mailroom_emails_total{outcome="throttled"}')).toBe(1);
  expect(value(text, 'mailroom_ses_send_duration_seconds_count{connection="default",outcome="ok"}')).toBe(2);
  expect(value(text, 'mailroom_ses_send_duration_seconds_count{connection="default",outcome="error"}')).toBe(2);
  expect(value(text, 'mailroom_send_rate_gate_wait_seconds_count{connection="default"}')).toBe(4);
  expect(value(text, 'mailroom_queue_jobs{queue="send",state="waiting"}')).toBe(0);
  expect(value(text, 'mailroom_queue_jobs{queue="workflow",state="failed"}')).toBe(0);
  // Maintenance passes are jobs too (the segment refresher ticks every second): visible with their results.
  expect(value(text, 'mailroom_queue_jobs{queue="maintenance",state="failed"}')).toBe(0);
  const maintenance = e2e.api.queues.maintenance;
  const done = await waitFor(
    async () => {
      const jobs = await maintenance.getCompleted(0, 10);
      return jobs.find((j) => j.name === 'segments');
    },
    10_000,
    'a completed segments pass',
  );
  expect(done.returnvalue).toEqual(expect.objectContaining({ refreshed: expect.any(Number) }));
  // Both Postgres pools: the main one has served the sends' lone claims and finishes; nothing waits once they are done.
  expect(value(text, 'mailroom_db_pool_connections{pool="main",state="total"}')).toBeGreaterThanOrEqual(1);
  expect(value(text, 'mailroom_db_pool_connections{pool="main",state="waiting"}')).toBe(0);
  expect(value(text, 'mailroom_db_pool_connections{pool="send",state="waiting"}')).toBe(0);
  expect(value(text, 'mailroom_db_pool_connections{pool="send",state="total"}')).toBeLessThanOrEqual(4);
  for (const family of [
    'mailroom_campaign_progress_ratio',
    'mailroom_campaign_pending_emails',
    'mailroom_reconciler_reenqueued_total',
    'mailroom_workflow_jobs_total',
    'mailroom_worker_process_cpu_seconds_total',
  ]) {
    expect(text).toContain(`# HELP ${family}`);
  }
});
