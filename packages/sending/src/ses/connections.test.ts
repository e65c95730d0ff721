/**
 * The connection router and the shared health, against real Redis and the SES emulator (through the run's
 * recorder, and through a proxy this test makes fail or freeze): the failure window and its reset by a success,
 * failover only to a connection that has the domain verified, the pin of a message whose SES answer was lost, and
 * the probe that brings a connection back.
 */
import IORedis from 'ioredis';
import { createLogger } from '@mailroom/platform/logger';
import { normalizeEmail } from '@mailroom/platform/address';
import { testConfig, uniquePrefix, waitFor } from '../../../../test/support/harness';
import { acceptedAt, FailingSes } from '../../../../test/support/failing-ses';
import { ConnectionHealth, isConnectionFailure } from './connection-health';
import { ConnectionRouter, domainOf, type DeliveryConnection } from './connections';
import { classifySendError, SesTransport } from './transport';

const EMULATOR = process.env.TEST_SES_ENDPOINT!;
const WINDOW_MS = 400;
const logger = createLogger(testConfig({ LOG_LEVEL: 'silent' }), 'worker');

let redis: IORedis;
let proxy: FailingSes;
beforeAll(async () => {
  redis = new IORedis(process.env.TEST_REDIS_URL!);
  proxy = await new FailingSes(new URL(EMULATOR)).listen();
});
afterAll(async () => {
  redis.disconnect();
  await proxy.close();
});

/** A connection to `endpoint` whose SES has the domains `verified` says. */
function connection(
  name: string,
  endpoint: string,
  verified: (domain: string) => boolean = () => true,
): DeliveryConnection {
  const transport = new SesTransport({
    sesRegion: 'us-east-1',
    sesEndpoint: endpoint,
    awsCredentials: undefined,
    sesConfigurationSet: undefined,
    sesTimeoutMs: 600,
  });
  return {
    name,
    transport,
    verifies: async (d) => verified(d),
    probe: () =>
      fetch(`${endpoint}/v2/email/account`).then(
        (r) =>
          r.status >= 500 &&
          Promise.reject(Object.assign(new Error('5xx'), { $metadata: { httpStatusCode: r.status } })),
      ),
  };
}

function router(connections: DeliveryConnection[], prefix = uniquePrefix()) {
  const health = new ConnectionHealth(redis, prefix, WINDOW_MS);
  return { health, router: new ConnectionRouter({ connections, health, redis, prefix, logger }) };
}

const message = (to: string, key?: string) => ({
  raw: Buffer.from(`From: a@d.example.com\r\nTo: ${to}\r\nSubject: s\r\n\r\nhi\r\n`),
  from: 'a@d.example.com',
  to: [normalizeEmail(to)],
  ...(key ? { key } : {}),
});
const to = () => `r.${Math.random().toString(36).slice(2)}@inbox.test`;

test('domainOf reads the domain of a bare or named address, lower case', () => {
  expect(domainOf('a@Example.COM')).toBe('example.com');
  expect(domainOf('Name <x@Mail.Example.com>')).toBe('mail.example.com');
});

test('5xx, unreachable and throttled answers count against a connection; a refused message and an enforcement stop do not', () => {
  const failure = (name: string, status?: number, code?: string) =>
    isConnectionFailure(
      classifySendError(
        Object.assign(new Error('x'), { name, ...(code ? { code } : {}), $metadata: { httpStatusCode: status } }),
      ),
    );
  expect(failure('ServiceUnavailable', 503)).toBe(true);
  expect(failure('TooManyRequestsException', 429)).toBe(true);
  expect(failure('Error', undefined, 'ECONNREFUSED')).toBe(true);
  expect(failure('MessageRejected', 400)).toBe(false);
  expect(failure('SendingPausedException', 400)).toBe(false);
  expect(failure('AccountSuspendedException', 400)).toBe(false);
});

test('failures mark a connection unhealthy only once they have lasted the window; a success in between starts it again', async () => {
  const prefix = uniquePrefix();
  const health = new ConnectionHealth(redis, prefix, WINDOW_MS);
  expect(await health.failed('a')).toBe(false);
  await health.succeeded('a');
  expect(await redis.exists(health.key('a'))).toBe(0);
  const started = Date.now();
  expect(await health.failed('a')).toBe(false);
  const marked = await waitFor(async () => (await health.failed('a')) && Date.now(), 10_000, 'unhealthy');
  expect(marked - started).toBeGreaterThanOrEqual(WINDOW_MS - 20);
  // Another process sees it (its own view, read from Redis).
  expect(await new ConnectionHealth(redis, prefix, WINDOW_MS).healthy('a')).toBe(false);
  await health.succeeded('a');
  expect(await new ConnectionHealth(redis, prefix, WINDOW_MS).healthy('a')).toBe(true);
});

test('an unhealthy connection fails over only to one whose SES has the domain verified, and the probe brings it back', async () => {
  proxy.mode = '5xx';
  const primary = connection('primary', proxy.url);
  const unverified = connection('unverified', EMULATOR, () => false);
  const backup = connection('backup', EMULATOR, (d) => d === 'd.example.com');
  const { router: r, health } = router([primary, unverified, backup]);
  try {
    const first = to();
    await expect(r.send(message(first))).rejects.toMatchObject({ name: 'ServiceUnavailable' });
    await waitFor(
      async () => {
        await r.send(message(to())).catch(() => undefined);
        return !(await health.healthy('primary'));
      },
      10_000,
      'primary unhealthy',
    );
    const next = to();
    expect(await r.send(message(next))).toMatchObject({ connection: 'backup' });
    expect(await acceptedAt(EMULATOR, [next])).toHaveLength(1);
    // Another domain, verified nowhere else: it stays with its own connection (and waits).
    expect((await r.route({ from: 'x@other.example.org' })).name).toBe('primary');

    expect(await r.probeUnhealthy(1000)).toEqual([]);
    proxy.mode = 'healthy';
    expect(await r.probeUnhealthy(1000)).toEqual([]); // one probe per interval across the deployment
    await waitFor(async () => (await r.probeUnhealthy(1000)).includes('primary'), 5_000, 'primary probed healthy');
    expect((await r.route({ from: 'a@d.example.com' })).name).toBe('primary');
  } finally {
    proxy.mode = 'healthy';
    r.close();
  }
});

test('a message whose SES answer was lost is pinned to that connection: its retry never goes through another', async () => {
  const primary = connection('primary', proxy.url);
  const backup = connection('backup', EMULATOR);
  const prefix = uniquePrefix();
  const { router: r, health } = router([primary, backup], prefix);
  try {
    proxy.mode = 'frozen';
    const key = `email-${Math.random().toString(36).slice(2)}`;
    const err = await r.send(message(to(), key)).catch((e: unknown) => e);
    expect(classifySendError(err).kind).toBe('unreachable');
    // The primary is marked unhealthy for everything else…
    await waitFor(
      async () => {
        await health.failed('primary');
        return !(await health.healthy('primary'));
      },
      10_000,
      'primary unhealthy',
    );
    expect((await r.route({ from: 'a@d.example.com', key: 'another' })).name).toBe('backup');
    // …but the pinned message stays with it…
    expect((await r.route({ from: 'a@d.example.com', key })).name).toBe('primary');
    // …in any process: one that saw no incident itself (another worker, or this one restarted) finds the pin too.
    const other = new ConnectionRouter({ connections: [primary, backup], health, redis, prefix, logger });
    expect((await other.route({ from: 'a@d.example.com', key })).name).toBe('primary');
    expect((await other.route({ from: 'a@d.example.com', key: 'another' })).name).toBe('backup');
    // Even once the primary is healthy again: a message pinned to the backup (its answer lost there during the
    // failover) is retried through the backup by a process that never saw the incident.
    await health.succeeded('primary');
    const failedOver = `email-${Math.random().toString(36).slice(2)}`;
    await redis.set(`${prefix}:ses-pinned:${failedOver}`, 'backup', 'EX', 60);
    const fresh = new ConnectionRouter({ connections: [primary, backup], health, redis, prefix, logger });
    expect((await fresh.route({ from: 'a@d.example.com', key: failedOver })).name).toBe('backup');
    expect((await fresh.route({ from: 'a@d.example.com', key: 'another' })).name).toBe('primary');
  } finally {
    proxy.mode = 'healthy';
    r.close();
  }
});

test('a bulk call the transport split and that failed in part: the failed part is pinned as a lost answer, the rest sent', async () => {
  const timeout = Object.assign(new Error('no answer'), { name: 'TimeoutError' });
  const bulkOnly = (name: string): DeliveryConnection => ({
    name,
    transport: {
      send: () => Promise.reject(new Error('not used')),
      sendBulk: (call) =>
        Promise.resolve({
          outcomes: call.entries.map((e, i) =>
            i < 2 ? { messageId: `m-${e.key}` } : { error: timeout, wholeCall: true },
          ),
        }),
      close: () => undefined,
    },
    verifies: async () => true,
    probe: async () => undefined,
  });
  const prefix = uniquePrefix();
  const { router: r } = router([bulkOnly('a'), bulkOnly('b')], prefix);
  const entries = ['k1', 'k2', 'k3', 'k4'].map((key) => ({ to: to(), data: '{}', headers: [], tags: {}, key }));
  const { outcomes } = await r.sendBulk!({ from: 'n@d.example.com', connection: 'a', entries });
  expect(outcomes.map((o) => ('messageId' in o ? o.messageId : o.error.name))).toEqual([
    'm-k1',
    'm-k2',
    'TimeoutError',
    'TimeoutError',
  ]);
  expect(outcomes.every((o) => o.connection === 'a')).toBe(true);
  const pins = await Promise.all(entries.map((e) => redis.get(`${prefix}:ses-pinned:${e.key}`)));
  expect(pins).toEqual([null, null, 'a', 'a']);
});

test("sendRate is the named connection's gate's rate (the default's when unnamed); a transport without a gate has none", () => {
  const withGate = (name: string, rate: number): DeliveryConnection => ({
    ...connection(name, EMULATOR),
    transport: new SesTransport(
      {
        sesRegion: 'us-east-1',
        sesEndpoint: EMULATOR,
        awsCredentials: undefined,
        sesConfigurationSet: undefined,
        sesTimeoutMs: 600,
      },
      { acquire: () => Promise.resolve(0), rate },
    ),
  });
  const { router: r } = router([withGate('primary', 700), withGate('backup', 14)]);
  expect([r.sendRate(), r.sendRate('primary'), r.sendRate('backup'), r.sendRate('gone')]).toEqual([700, 700, 14, 700]);
  expect(router([connection('bare', EMULATOR)]).router.sendRate()).toBeUndefined();
});
