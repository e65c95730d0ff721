/** The queue catalog: persisted names, payload schemas, job ids and options, consumer settings. */
import { loadQueueConfig } from './config';
import { dataValidator } from '@mailroom/platform/validation';
import {
  campaignJobOptions,
  importJobOptions,
  maintenanceJobOptions,
  QUEUE_KEYS,
  queueCatalog,
  QueueName,
  sendJobOptions,
  SendPriority,
  smoothLimiter,
  WEBHOOK_BACKOFF,
  webhookBackoffMs,
  webhookJobOptions,
  workflowJobOptions,
  type QueueSpec,
} from './catalog';

const config = loadQueueConfig({
  WORKER_CONCURRENCY: '8',
  WORKER_LOCK_MS: '30000',
  WEBHOOK_TIMEOUT_MS: '20000',
  WEBHOOK_RETRY_SCHEDULE_MS: '1000,5000,60000',
});
const id = '01890a5d-ac96-774b-bcce-b302099a8057';
const projectId = '01890a5d-ac96-774b-bcce-b302099a8058';

test('the persisted queue names, in catalog order (Redis keys: never renamed)', () => {
  expect(QUEUE_KEYS).toEqual(['send', 'import', 'campaign', 'webhook', 'workflow', 'maintenance']);
  expect(QUEUE_KEYS.map((k) => queueCatalog[k].name)).toEqual([
    'send',
    'contact-import',
    'campaign',
    'webhook',
    'workflow',
    'maintenance',
  ]);
  expect(Object.values(QueueName).sort()).toEqual(QUEUE_KEYS.map((k) => queueCatalog[k].name).sort());
});

describe('payload schemas', () => {
  const valid = {
    send: { emailId: id, projectId },
    import: { importId: id, projectId },
    campaign: { campaignId: id, projectId },
    webhook: { deliveryId: id, projectId, generation: 0 },
    workflow: { executionId: id, projectId },
    maintenance: {},
  } as const;
  test.each(QUEUE_KEYS)('%s: accepts its payload, refuses extra fields and a missing one', (key) => {
    const check = dataValidator(queueCatalog[key].payload);
    expect(check(valid[key]).ok).toBe(true);
    expect(check({ ...valid[key], extra: 1 }).ok).toBe(false);
    const [first] = Object.keys(valid[key]);
    if (first) expect(check({ ...valid[key], [first]: undefined }).ok).toBe(false);
  });
  test('ids are uuids; a webhook generation is a non-negative integer', () => {
    expect(dataValidator(queueCatalog.send.payload)({ emailId: 'nope', projectId }).ok).toBe(false);
    expect(dataValidator(queueCatalog.webhook.payload)({ deliveryId: id, projectId, generation: -1 }).ok).toBe(false);
    expect(dataValidator(queueCatalog.webhook.payload)({ deliveryId: id, projectId, generation: 1.5 }).ok).toBe(false);
  });
});

describe('job options', () => {
  test('send: job id = email id, the lane priority, the configured attempts and backoff', () => {
    expect(sendJobOptions(config, id, SendPriority.campaign)).toEqual({
      jobId: id,
      priority: 10,
      attempts: config.sendMaxAttempts,
      backoff: { type: 'exponential', delay: config.sendBackoffMs },
      removeOnComplete: { age: 3600, count: 10_000 },
      removeOnFail: { age: 7 * 24 * 3600 },
    });
    expect(SendPriority.transactional).toBeLessThan(SendPriority.workflow);
    expect(SendPriority.workflow).toBeLessThan(SendPriority.campaign);
  });
  test('contact-import: job id = import id, 5 attempts', () => {
    expect(importJobOptions(id)).toMatchObject({
      jobId: id,
      attempts: 5,
      backoff: { type: 'exponential', delay: 2_000 },
    });
  });
  test('campaign: job id = campaign id, a past run time is no delay, a finished job frees its id', () => {
    expect(campaignJobOptions(id, 5_000)).toMatchObject({
      jobId: id,
      delay: 5_000,
      attempts: 20,
      removeOnComplete: true,
    });
    expect(campaignJobOptions(id, -10).delay).toBe(0);
  });
  test('webhook: job id per delivery and generation, one attempt plus one per retry', () => {
    expect(webhookJobOptions(config, { id, projectId, generation: 2 })).toMatchObject({
      jobId: `wh-${id}-2`,
      attempts: 4,
      backoff: { type: WEBHOOK_BACKOFF },
    });
  });
  test('workflow: job id per execution, version and suffix; delays rounded, never negative', () => {
    const ref = { id, projectId, version: 3 };
    expect(workflowJobOptions(ref)).toMatchObject({
      jobId: `wf-${id}-3`,
      delay: 0,
      attempts: 10,
      removeOnComplete: true,
    });
    expect(workflowJobOptions(ref, 1_500.6, 'r42')).toMatchObject({ jobId: `wf-${id}-3-r42`, delay: 1_501 });
    expect(workflowJobOptions(ref, -5).delay).toBe(0);
  });
  test('maintenance: job id per task and tick, never retried', () => {
    expect(maintenanceJobOptions('reconcile', 123)).toEqual({
      jobId: 'reconcile-123',
      attempts: 1,
      removeOnComplete: { count: 100, age: 3600 },
      removeOnFail: { count: 500, age: 7 * 24 * 3600 },
    });
  });
  test('every catalog entry names its own job options factory', () => {
    expect(queueCatalog.send.jobOptions).toBe(sendJobOptions);
    expect(queueCatalog.import.jobOptions).toBe(importJobOptions);
    expect(queueCatalog.campaign.jobOptions).toBe(campaignJobOptions);
    expect(queueCatalog.webhook.jobOptions).toBe(webhookJobOptions);
    expect(queueCatalog.workflow.jobOptions).toBe(workflowJobOptions);
    expect(queueCatalog.maintenance.jobOptions).toBe(maintenanceJobOptions);
  });
});

describe('worker settings', () => {
  test('send: concurrency and lock from config, a smooth limiter at the send rate', () => {
    expect(queueCatalog.send.worker(config, 40)).toEqual({
      concurrency: 8,
      limiter: { max: 1, duration: 25 },
      lockDuration: 30_000,
      stalledInterval: 30_000,
      maxStalledCount: 1_000,
    });
    expect(smoothLimiter(14)).toEqual({ max: 1, duration: 71 });
    expect(smoothLimiter(100)).toEqual({ max: 1, duration: 10 });
    // Above 100/s: starts in windows of about 10 ms (BullMQ counts whole ms), never slower than the rate.
    expect(smoothLimiter(150)).toEqual({ max: 2, duration: 13 });
    expect(smoothLimiter(5_000)).toEqual({ max: 50, duration: 10 });
  });
  test('only the send queue is rate limited', () => {
    for (const key of QUEUE_KEYS.filter((k) => k !== 'send')) {
      const spec: QueueSpec = queueCatalog[key];
      expect(spec.worker(config, 40)).not.toHaveProperty('limiter');
    }
  });
  test('import, campaign, workflow, maintenance: their concurrency and locks', () => {
    expect(queueCatalog.import.worker(config)).toEqual({
      concurrency: config.importConcurrency,
      lockDuration: 30_000,
      stalledInterval: 30_000,
      maxStalledCount: 100,
    });
    expect(queueCatalog.campaign.worker(config)).toEqual({
      concurrency: 4,
      lockDuration: 30_000,
      stalledInterval: 30_000,
      maxStalledCount: 100,
    });
    expect(queueCatalog.workflow.worker(config)).toEqual({
      concurrency: config.workflowConcurrency,
      lockDuration: 60_000,
      stalledInterval: 60_000,
      maxStalledCount: 1_000,
    });
    expect(queueCatalog.maintenance.worker()).toEqual({ concurrency: 1, lockDuration: 60_000, maxStalledCount: 1 });
  });
  test('webhook: a lock that outlasts two request timeouts; retries spaced by the configured schedule', () => {
    const w = queueCatalog.webhook.worker(config);
    expect(w).toMatchObject({
      concurrency: config.webhookConcurrency,
      lockDuration: 40_000,
      stalledInterval: 40_000,
      maxStalledCount: 10,
    });
    const backoff = w.settings.backoffStrategy;
    expect([1, 2, 3, 4].map((n) => backoff(n, WEBHOOK_BACKOFF))).toEqual([1_000, 5_000, 60_000, 60_000]);
    expect(backoff(1, 'other')).toBe(1_000);
    expect(webhookBackoffMs([], 3)).toBe(0);
  });
});
