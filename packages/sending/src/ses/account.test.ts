/**
 * The account watcher without SES or Postgres: a provider whose answers the test sets, and a local send count the
 * test moves. It reads at start, keeps the last figures (or the cap, or 14/s) when a read fails, pushes a changed
 * rate to its listeners, and adds the sends since a reading to the reading's 24-hour count.
 */
import { createLogger } from '@mailroom/platform/logger';
import { type AccountProvider, type SesAccount } from '@mailroom/mail/ses-account';
import { AccountWatcher } from './account';

const logger = createLogger({ logLevel: 'silent', logPretty: false }, 'test');

/** A provider answering `next` (or throwing it), counting calls. */
function fakeProvider(first: Partial<SesAccount> | Error) {
  const p = {
    next: first,
    calls: 0,
    kind: 'ses' as const,
    getAccount(): Promise<SesAccount> {
      p.calls++;
      const n = p.next;
      if (n instanceof Error) return Promise.reject(n);
      return Promise.resolve({
        maxSendRate: 14,
        max24HourSend: 50_000,
        sentLast24Hours: 0,
        sendingEnabled: true,
        readAt: new Date(),
        ...n,
      });
    },
  };
  return p satisfies AccountProvider & object;
}

/** A local count from a given hour on: `sent` moves as the test says. */
function fakeCount(start: number) {
  const c = {
    sent: start,
    fail: false,
    sentSinceHour: (hour?: Date) =>
      c.fail ? Promise.reject(new Error('postgres down')) : Promise.resolve({ hour: hour ?? new Date(), sent: c.sent }),
  };
  return c;
}

const watchers: AccountWatcher[] = [];
afterEach(() => {
  for (const w of watchers.splice(0)) w.stop();
});
const watch = (provider: AccountProvider, cap?: number, count?: ReturnType<typeof fakeCount>, refreshMs = 300_000) => {
  const w = new AccountWatcher({
    provider,
    config: { sesMaxSendRate: cap, sesAccountRefreshMs: refreshMs },
    logger,
    ...(count ? { sentSinceHour: count.sentSinceHour } : {}),
  });
  watchers.push(w);
  return w;
};

test("reads at start: the rate is the account's, capped by SES_MAX_SEND_RATE", async () => {
  const uncapped = watch(fakeProvider({ maxSendRate: 200 }));
  await uncapped.start();
  expect(uncapped.rate).toBe(200);
  expect(uncapped.account).toMatchObject({ maxSendRate: 200, max24HourSend: 50_000 });
  const capped = watch(fakeProvider({ maxSendRate: 200 }), 50);
  await capped.start();
  expect(capped.rate).toBe(50);
  const below = watch(fakeProvider({ maxSendRate: 14 }), 50);
  await below.start();
  expect(below.rate).toBe(14);
});

test('a failed first read falls back to the cap, else 14/s; never throws; the error is kept for metrics', async () => {
  const denied = Object.assign(new Error('not authorized to perform: ses:GetAccount'), {
    name: 'AccessDeniedException',
  });
  const withCap = watch(fakeProvider(denied), 30);
  await withCap.start();
  expect(withCap.rate).toBe(30);
  expect(withCap.account).toBeUndefined();
  expect(withCap.error).toContain('AccessDeniedException');
  const bare = watch(fakeProvider(denied));
  await bare.start();
  expect(bare.rate).toBe(14);
  expect(await bare.estimate()).toBeUndefined();
});

test('a later failure keeps the last figures; a changed rate reaches the listeners without a restart', async () => {
  const provider = fakeProvider({ maxSendRate: 14 });
  const w = watch(provider);
  const seen: number[] = [];
  w.onRateChange((r) => seen.push(r));
  await w.start();
  provider.next = new Error('connect ECONNREFUSED');
  await w.refresh();
  expect(w.rate).toBe(14);
  expect(w.account?.maxSendRate).toBe(14);
  expect(w.error).toContain('ECONNREFUSED');
  provider.next = { maxSendRate: 40 };
  await w.refresh();
  expect(w.rate).toBe(40);
  expect(w.error).toBeUndefined();
  provider.next = { maxSendRate: 40 };
  await w.refresh();
  expect(seen).toEqual([40]);
});

test('refreshes on its own every SES_ACCOUNT_REFRESH_MS', async () => {
  const provider = fakeProvider({ maxSendRate: 14 });
  const w = watch(provider, undefined, undefined, 100);
  await w.start();
  provider.next = { maxSendRate: 28 };
  const deadline = Date.now() + 10_000;
  while (w.rate !== 28 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(w.rate).toBe(28);
  expect(provider.calls).toBeGreaterThanOrEqual(2);
});

test('a start that SES does not answer goes on at the fallback rate and applies the reading when it lands', async () => {
  let answer!: (a: SesAccount) => void;
  const slow: AccountProvider = { kind: 'ses', getAccount: () => new Promise<SesAccount>((r) => (answer = r)) };
  const w = new AccountWatcher({
    provider: slow,
    config: { sesMaxSendRate: 20, sesAccountRefreshMs: 300_000 },
    logger,
    firstReadWaitMs: 300,
  });
  watchers.push(w);
  const started = Date.now();
  await w.start();
  expect(Date.now() - started).toBeGreaterThanOrEqual(300 - 20);
  expect(w.rate).toBe(20);
  answer({ maxSendRate: 10, max24HourSend: 1000, sentLast24Hours: 0, sendingEnabled: true, readAt: new Date() });
  await w.refresh();
  expect(w.rate).toBe(10);
});

test("the estimate adds this deployment's sends since the reading; without the count, the reading alone", async () => {
  const count = fakeCount(100);
  const w = watch(fakeProvider({ max24HourSend: 60, sentLast24Hours: 40 }), undefined, count);
  await w.start();
  expect(await w.estimate()).toMatchObject({ sentLast24Hours: 40, sentSinceRead: 0 });
  count.sent = 117;
  expect(await w.estimate()).toMatchObject({ sentLast24Hours: 57, sentSinceRead: 17 });
  count.fail = true;
  expect(await w.estimate()).toMatchObject({ sentLast24Hours: 40, sentSinceRead: 0 });
});
