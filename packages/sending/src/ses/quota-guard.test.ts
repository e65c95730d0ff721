/** The campaign quota guard: room before the reserve, uncounted admissions, and when it reads the count. */
import { CampaignQuotaGuard } from './quota-guard';

/** An account whose 24-hour count the test sets; counts its reads. */
function account(max24HourSend: number, rate = 10) {
  const a = {
    sent: 0,
    reads: 0,
    rate,
    estimate() {
      a.reads++;
      return Promise.resolve({
        maxSendRate: rate,
        max24HourSend,
        sentLast24Hours: a.sent,
        sentSinceRead: 0,
        sendingEnabled: true,
        readAt: new Date(),
      });
    },
  };
  return a;
}

test('near the line: one admission per email of room, counting those admitted and not yet counted', async () => {
  const acc = account(100); // reserve 5% → campaigns stop at 95
  acc.sent = 90;
  const guard = new CampaignQuotaGuard(acc, 0.05, 60_000);
  const results = await Promise.all(Array.from({ length: 8 }, () => guard.admit()));
  // 5 of room: 5 admitted, the other 3 refused, though none of the 5 is counted yet.
  expect(results.filter((r) => r.ok)).toHaveLength(5);
  expect(results.filter((r) => !r.ok)).toEqual([
    { ok: false, remaining: 0 },
    { ok: false, remaining: 0 },
    { ok: false, remaining: 0 },
  ]);
  // Two of them were sent (now counted), one failed (never counted): one more email of room.
  const admitted = results.filter((r) => r.ok);
  acc.sent = 92;
  for (const a of admitted.slice(0, 3)) if (a.ok) a.done();
  expect((await guard.admit()).ok).toBe(true);
  expect((await guard.admit()).ok).toBe(false);
});

test('far from the line a reading is reused while the rate cannot have used the room; an unlimited quota is never read again', async () => {
  let now = 1_000_000;
  const acc = account(10_000, 10);
  const guard = new CampaignQuotaGuard(acc, 0.05, 60_000, () => now);
  for (let i = 0; i < 50; i++) expect((await guard.admit()).ok).toBe(true);
  expect(acc.reads).toBe(1);
  // 9,500 of room, less 10/s for 15 minutes and the admissions held: still room, no read.
  now += 15 * 60_000;
  expect((await guard.admit()).ok).toBe(true);
  expect(acc.reads).toBe(1);
  // 16 minutes: the rate could have used it all, so it reads the count again.
  now += 60_000;
  expect((await guard.admit()).ok).toBe(true);
  expect(acc.reads).toBe(2);

  const unlimited = account(Infinity);
  const open = new CampaignQuotaGuard(unlimited, 0.05, 60_000);
  for (let i = 0; i < 20; i++) expect((await open.admit()).ok).toBe(true);
  expect(unlimited.reads).toBe(1);
});

test('no reading yet: admitted; an admission never released frees itself after holdMs', async () => {
  const none = new CampaignQuotaGuard({ rate: 10, estimate: () => Promise.resolve(undefined) }, 0.05, 60_000);
  expect((await none.admit()).ok).toBe(true);
  jest.useFakeTimers();
  try {
    const acc = account(100);
    acc.sent = 94;
    const guard = new CampaignQuotaGuard(acc, 0.05, 5_000);
    expect((await guard.admit()).ok).toBe(true);
    expect((await guard.admit()).ok).toBe(false);
    jest.advanceTimersByTime(5_000);
    expect((await guard.admit()).ok).toBe(true);
  } finally {
    jest.useRealTimers();
  }
});
