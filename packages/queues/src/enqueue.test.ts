/** The enqueue functions build each kind of job from the catalog (a recording stand-in for BullMQ's Queue). */
import type { Queue } from 'bullmq';
import {
  importJobOptions,
  maintenanceJobOptions,
  sendJobOptions,
  webhookJobOptions,
  workflowJobOptions,
} from './catalog';
import {
  relayWebhookDeliveries,
  enqueueExecutions,
  enqueueImport,
  enqueueMaintenance,
  enqueueSendJobs,
  enqueueWebhookDeliveries,
} from './enqueue';

interface Added {
  name: string;
  data: unknown;
  opts: unknown;
}

/** A queue that records what is added, or fails every add. */
function recordingQueue(fail = false): { queue: Queue; added: Added[] } {
  const added: Added[] = [];
  const add = async (name: string, data: unknown, opts: unknown) => {
    if (fail) throw new Error('redis down');
    added.push({ name, data, opts });
  };
  const queue = {
    add,
    addBulk: async (jobs: Added[]) => {
      if (fail) throw new Error('redis down');
      added.push(...jobs);
    },
  };
  return { queue: queue as unknown as Queue, added };
}

const config = { sendMaxAttempts: 8, sendBackoffMs: 5_000, webhookRetryScheduleMs: [1_000, 2_000] };
const log = { warn: jest.fn() };

test('send jobs: one bulk add, payload and options per email; nothing for none; a Redis failure is thrown', async () => {
  const { queue, added } = recordingQueue();
  await enqueueSendJobs(queue, config, [
    { emailId: 'e1', projectId: 'p1', priority: 1 },
    { emailId: 'e2', projectId: 'p2', priority: 10 },
  ]);
  expect(added).toEqual([
    { name: 'send', data: { emailId: 'e1', projectId: 'p1' }, opts: sendJobOptions(config, 'e1', 1) },
    { name: 'send', data: { emailId: 'e2', projectId: 'p2' }, opts: sendJobOptions(config, 'e2', 10) },
  ]);
  await enqueueSendJobs(queue, config, []);
  expect(added).toHaveLength(2);
  await expect(
    enqueueSendJobs(recordingQueue(true).queue, config, [{ emailId: 'e1', projectId: 'p1', priority: 1 }]),
  ).rejects.toThrow('redis down');
});

test('import and maintenance jobs', async () => {
  const { queue, added } = recordingQueue();
  await enqueueImport(queue, { id: 'i1', projectId: 'p1' });
  await enqueueMaintenance(queue, 'segments', 7);
  expect(added).toEqual([
    { name: 'import', data: { importId: 'i1', projectId: 'p1' }, opts: importJobOptions('i1') },
    { name: 'segments', data: {}, opts: maintenanceJobOptions('segments', 7) },
  ]);
});

test('webhook deliveries: enqueue throws on failure, announce logs it instead', async () => {
  const { queue, added } = recordingQueue();
  const ref = { id: 'd1', projectId: 'p1', generation: 1 };
  await enqueueWebhookDeliveries(queue, config, [ref]);
  expect(added).toEqual([
    {
      name: 'webhook',
      data: { deliveryId: 'd1', projectId: 'p1', generation: 1 },
      opts: webhookJobOptions(config, ref),
    },
  ]);
  await expect(enqueueWebhookDeliveries(recordingQueue(true).queue, config, [ref])).rejects.toThrow('redis down');
  await relayWebhookDeliveries(recordingQueue(true).queue, config, [ref], log);
  expect(log.warn).toHaveBeenCalledWith(
    expect.objectContaining({ deliveries: 1 }),
    expect.stringContaining('reconciler'),
  );
});

test('workflow executions: a suffix per execution; a failure is logged', async () => {
  const { queue, added } = recordingQueue();
  const refs = [{ id: 'x1', projectId: 'p1', version: 2, n: 'a' }];
  await enqueueExecutions(queue, refs, log, 1_000, (r) => r.n);
  expect(added).toEqual([
    { name: 'run', data: { executionId: 'x1', projectId: 'p1' }, opts: workflowJobOptions(refs[0], 1_000, 'a') },
  ]);
  log.warn.mockClear();
  await enqueueExecutions(recordingQueue(true).queue, refs, log);
  expect(log.warn).toHaveBeenCalledWith(
    expect.objectContaining({ executions: 1 }),
    expect.stringContaining('reconciler'),
  );
});
