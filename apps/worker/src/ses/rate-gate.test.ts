import IORedis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { gateIntervalMicros, SendRateGate } from './rate-gate';

test('interval: (1000 + margin) ms per second of sends', () => {
  expect(gateIntervalMicros(14, 25)).toBe(73215);
  expect(gateIntervalMicros(1, 0)).toBe(1_000_000);
});

test('concurrent callers on separate connections get one grant per interval', async () => {
  const key = `{gate-${randomBytes(4).toString('hex')}}:gate`;
  const conns = [0, 1, 2].map(() => new IORedis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'));
  try {
    const gates = conns.map((c) => new SendRateGate(c, key, 50, 10));
    const times: number[] = [];
    await Promise.all(
      gates.flatMap((g) => Array.from({ length: 10 }, async () => {
        await g.acquire();
        times.push(performance.now());
      })),
    );
    times.sort((a, b) => a - b);
    // 30 grants at 50/s take at least 29 intervals of 20.2 ms (the decisions are spaced on the Redis clock;
    // reply jitter moves single grants, not the span), and not much more: callers do not starve.
    const span = times[29]! - times[0]!;
    expect(span).toBeGreaterThan(29 * 20.2 - 2);
    expect(span).toBeLessThan(29 * 20.2 + 250);
  } finally {
    for (const c of conns) c.disconnect();
  }
});
