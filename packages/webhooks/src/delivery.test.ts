import { webhookAttemptOutcome } from './delivery';
import { webhookBackoffMs } from '@mailroom/queues/catalog';

const schedule = [5_000, 300_000, 1_800_000];

test('webhookBackoffMs: the wait before retry n is schedule[n-1], the last entry repeating', () => {
  expect([1, 2, 3, 4, 9].map((n) => webhookBackoffMs(schedule, n))).toEqual([
    5_000, 300_000, 1_800_000, 1_800_000, 1_800_000,
  ]);
  expect(webhookBackoffMs([], 1)).toBe(0);
});

test('a 2xx answer succeeds on any attempt', () => {
  for (const statusCode of [200, 204, 299]) {
    expect(webhookAttemptOutcome({ statusCode }, { attempt: 4, attempts: 4 }, schedule, 0)).toEqual({
      status: 'succeeded',
    });
  }
});

test('another answer, or none, stays pending until the next attempt of the schedule', () => {
  const now = Date.UTC(2025, 0, 1);
  expect(webhookAttemptOutcome({ statusCode: 500 }, { attempt: 1, attempts: 4 }, schedule, now)).toEqual({
    status: 'pending',
    nextAttemptAt: new Date(now + 5_000),
  });
  expect(webhookAttemptOutcome({ statusCode: 302 }, { attempt: 2, attempts: 4 }, schedule, now)).toEqual({
    status: 'pending',
    nextAttemptAt: new Date(now + 300_000),
  });
  expect(webhookAttemptOutcome({}, { attempt: 3, attempts: 4 }, schedule, now)).toEqual({
    status: 'pending',
    nextAttemptAt: new Date(now + 1_800_000),
  });
});

test('the last attempt failing fails the delivery', () => {
  expect(webhookAttemptOutcome({ statusCode: 404 }, { attempt: 4, attempts: 4 }, schedule, 0)).toEqual({
    status: 'failed',
  });
  expect(webhookAttemptOutcome({}, { attempt: 1, attempts: 1 }, schedule, 0)).toEqual({ status: 'failed' });
});
