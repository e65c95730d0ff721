import IORedis from 'ioredis';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import {
  CATCH_UP_US,
  GateBusyError,
  gateIntervalMicros,
  SendRateGate,
  SES_BULK_SEND_PATH,
  SES_SEND_PATH,
} from './rate-gate';

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const freshKey = () => `{gate-${randomBytes(4).toString('hex')}}:gate`;
/** The tightest span (ms) of `n` consecutive times. */
const tightest = (times: number[], n: number) => {
  const sorted = [...times].sort((a, b) => a - b);
  return Math.min(...sorted.slice(n - 1).map((t, i) => t - sorted[i]));
};

/**
 * The gate's script calls seen by an `evalsha` spy, split into those that ask (they carry tokens asking) and the
 * rest, which only record confirmations. ARGV: five decision parameters, `together`, the count `c`, `c`
 * confirmations, the asks.
 */
const gateCalls = (spy: jest.SpyInstance) => {
  const asking = spy.mock.calls.map((call: unknown[]) => {
    const args = call.slice(2 + Number(call[1]));
    return args.length - 7 - Number(args[6]);
  });
  const asks = asking.filter((n) => n > 0).length;
  return { asks, confirmOnly: asking.length - asks };
};

let conns: IORedis[] = [];
afterEach(() => {
  for (const c of conns) c.disconnect();
  conns = [];
});
const connect = (n: number) => {
  const made = Array.from({ length: n }, () => new IORedis(redisUrl));
  conns.push(...made);
  return made;
};

test('interval: (1000 + margin) ms per second of sends', () => {
  expect(gateIntervalMicros(14, 25)).toBe(73215);
  expect(gateIntervalMicros(1, 0)).toBe(1_000_000);
});

test('concurrent callers on separate connections get one grant per interval', async () => {
  const key = freshKey();
  const gates = connect(3).map((c) => new SendRateGate(c, key, 50, 10));
  const grants: Array<{ at: number; gate: number }> = [];
  await Promise.all(
    gates.flatMap((g, gate) =>
      Array.from({ length: 10 }, async () => {
        await g.acquire();
        grants.push({ at: performance.now(), gate });
      }),
    ),
  );
  grants.sort((a, b) => a.at - b.at);
  // 30 grants at 50/s take 29 intervals of 20.2 ms on the Redis clock (each decision at its slot, t0 + k × interval).
  // Seen here, the first and the last grant are each moved by its reply's jitter (a late first reply no longer
  // pushes the later slots back: CATCH_UP_US), so two intervals of slack; two grants per interval would take 14.
  expect(grants[29].at - grants[0].at).toBeGreaterThan(27 * 20.2);
  // No caller starves: every connection is granted among the first half, whatever the machine's load (a bound
  // on the wall time would only measure the load).
  expect(new Set(grants.slice(0, 15).map((g) => g.gate)).size).toBe(3);
});

test('with a bounded wait, a caller that would wait longer gives up at once (GateBusyError) and nothing is granted for it', async () => {
  const [c] = connect(1);
  // 2/s: one grant per 525 ms. A bound of 200 ms admits one waiter per process at a time (at least one).
  const gate = new SendRateGate(c, freshKey(), 2, 50);
  await gate.acquire(5, 200);
  // The next slot is 525 ms away: more than the bound, so the caller gives its slot back instead of waiting.
  const busy = await gate.acquire(5, 200).then(
    () => null,
    (err: unknown) => err,
  );
  expect(busy).toBeInstanceOf(GateBusyError);
  expect((busy as GateBusyError).retryInMs).toBeGreaterThanOrEqual(200);
  // Without a bound it waits for its slot, as with one connection.
  const waited = await gate.acquire(5);
  expect(waited).toBeGreaterThan(200);
});

test('with a bounded wait, callers beyond what the gate grants within the bound give up without asking Redis; a more urgent one still waits', async () => {
  const [c] = connect(1);
  // 4/s, bound 500 ms: two waiters of a priority (or more urgent) per process; the rest give up at once.
  const gate = new SendRateGate(c, freshKey(), 4, 50);
  await gate.acquire(10);
  const outcomes = await Promise.all(
    [10, 10, 10, 10, 1].map((p) =>
      gate.acquire(p, 500).then(
        () => `granted ${p}`,
        (err: unknown) => (err instanceof GateBusyError ? `busy ${p}` : `error ${String(err)}`),
      ),
    ),
  );
  // The third and fourth campaign-like callers give up at once (the first two wait, and give up too once the bound
  // has passed behind the urgent one); the urgent caller is not counted behind them and is granted.
  expect(outcomes.filter((o) => o === 'busy 10').length).toBeGreaterThanOrEqual(2);
  expect(outcomes).toContain('granted 1');
});

/** A TCP proxy to Redis that hands every reply to its client `delayMs` late (a worker whose event loop lags). */
async function laggingRedisProxy(delayMs: number): Promise<{ url: string; close: () => Promise<void> }> {
  const target = new URL(redisUrl);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.on('data', (chunk) => setTimeout(() => client.write(chunk), delayMs));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

test('a worker whose grant reaches it late still leaves rate + 1 writes a full window apart', async () => {
  // 5/s, no margin: decisions 200 ms apart, at most 5 writes in any 1000 ms. One worker gets its Redis replies
  // 150 ms late (measured on a busy host: up to 132 ms) and takes the first grant; it writes 150 ms after the
  // decision. Two others then send 10 emails on the decisions after it. With the decisions spaced alone, the late
  // write and the 5 decisions after it make 6 writes in 1000 - 150 ms.
  const proxy = await laggingRedisProxy(150);
  try {
    const key = freshKey();
    const lagging = new IORedis(proxy.url);
    conns.push(lagging);
    await lagging.ping();
    const writes: number[] = [];
    const send = async (g: SendRateGate) => {
      await g.acquire();
      writes.push(performance.now());
    };
    const direct = connect(2).map((c) => new SendRateGate(c, key, 5, 0));
    const first = send(new SendRateGate(lagging, key, 5, 0));
    // Its request reaches Redis at once (only replies lag); the others start asking just after.
    await new Promise((r) => setTimeout(r, 20));
    await Promise.all([first, ...direct.flatMap((g) => Array.from({ length: 5 }, () => send(g)))]);
    expect(writes).toHaveLength(11);
    const span6 = tightest(writes, 6);
    console.log(`rate gate, a lagging worker: tightest 6 consecutive writes ${span6.toFixed(1)} ms (window 1000 ms)`);
    expect(span6).toBeGreaterThanOrEqual(1000 - 2);
  } finally {
    await proxy.close();
  }
});

test('a grant never confirmed (its process killed before the write) keeps its place until it expires', async () => {
  const key = freshKey();
  const [dying, living] = connect(2);
  // 3/s, no margin: at most 3 sends in any 1000 ms.
  await new SendRateGate(dying, key, 3, 0).acquire();
  dying.disconnect(); // the confirmation, due right after this tick, is lost
  const gate = new SendRateGate(living, key, 3, 0);
  const granted: number[] = [];
  for (let i = 0; i < 3; i++) {
    await gate.acquire();
    granted.push(performance.now());
  }
  // The dead grant holds one of three places: the third grant here waits for the first to leave the window.
  expect(granted[2] - granted[0]).toBeGreaterThanOrEqual(1000 - 5);
});

test('a grant is confirmed when its SES request has been written, not before: a slow write holds the window open', async () => {
  // A receiver that reads nothing for 400 ms, and a body larger than the socket buffers: the request's last byte
  // reaches the operating system only once the receiver reads, well after the grant.
  const server = http.createServer((req, res) => {
    req.pause();
    setTimeout(() => {
      req.resume();
      req.on('end', () => res.end('{}'));
    }, 400);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const [conn] = connect(1);
    // 2/s, no margin: decisions 500 ms apart, at most 2 sends in any 1000 ms.
    const gate = new SendRateGate(conn, freshKey(), 2, 0);
    const granted: number[] = [];
    await gate.acquire();
    granted.push(performance.now());
    const req = http.request({
      host: '127.0.0.1',
      port: (server.address() as AddressInfo).port,
      path: SES_SEND_PATH,
      method: 'POST',
      agent: false,
    });
    let written = 0;
    req.on('finish', () => (written = performance.now()));
    const answered = new Promise<void>((resolve, reject) => {
      req.on('response', (res) => res.resume().on('end', resolve));
      req.on('error', reject);
    });
    req.end(Buffer.alloc(32 * 1024 * 1024));
    // Two more grants with no request of their own (confirmed at once).
    for (let i = 0; i < 2; i++) {
      await gate.acquire();
      granted.push(performance.now());
    }
    await answered;
    expect(written - granted[0]).toBeGreaterThan(300);
    // Any 3 consecutive writes span the window: counted from the first send's write, not from its grant (which
    // would let the third grant come 1000 ms after the first grant, a few hundred ms after the slow write).
    const writes = [written, granted[1], granted[2]];
    expect(tightest(writes, 3)).toBeGreaterThanOrEqual(1000 - 5);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('setRate: the next decisions follow the new rate (an account reading changed it)', async () => {
  const [conn] = connect(1);
  const gate = new SendRateGate(conn, freshKey(), 50, 0);
  for (let i = 0; i < 3; i++) await gate.acquire();
  gate.setRate(4);
  expect(gate.rate).toBe(4);
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    await gate.acquire();
    times.push(performance.now());
  }
  // At 4/s decisions are 250 ms apart on the Redis clock (at 50/s, 20 ms); the margin absorbs reply jitter.
  expect(times[2] - times[0]).toBeGreaterThan(300);
});

test('within a process, a more urgent caller takes the next slot', async () => {
  const [c] = connect(1);
  const gate = new SendRateGate(c, freshKey(), 20, 0);
  const order: string[] = [];
  const ask = (name: string, priority: number) => gate.acquire(priority).then(() => order.push(name));
  // Eight campaign sends (priority 10) claimed at once, as a busy worker holds them at the gate.
  const campaign = Array.from({ length: 8 }, (_, i) => ask(`c${i}`, 10));
  // A transactional one (priority 1) arrives while they wait: after the first two campaign grants.
  while (order.length < 2) await new Promise((r) => setTimeout(r, 2));
  const grantedBefore = order.length;
  const tx = ask('tx', 1);
  await Promise.all([...campaign, tx]);
  // It is granted next, or after the one campaign grant already decided when it came; never behind the queue.
  expect(order.indexOf('tx') - grantedBefore).toBeLessThanOrEqual(1);
  expect(order.filter((n) => n !== 'tx').sort()).toEqual(Array.from({ length: 8 }, (_, i) => `c${i}`));
});

test('at a high rate, the asks of one turn are granted together, several per script call, still spaced on average', async () => {
  const [c] = connect(1);
  // 10,000/s: an interval of 100 µs, so one call may take up to GRANT_BURST_US / 100 µs = 20 intervals.
  const gate = new SendRateGate(c, freshKey(), 10_000, 0);
  const calls = jest.spyOn(c, 'evalsha');
  const started = performance.now();
  await Promise.all(Array.from({ length: 64 }, () => gate.acquire()));
  const elapsedMs = performance.now() - started;
  const takes = gateCalls(calls).asks;
  // One by one, 64 grants took 64 calls or more (each ask after the first of a turn was refused and asked again).
  expect(takes).toBeLessThanOrEqual(16);
  // 20 at once from the idle gate, then only the intervals that passed: 64 grants need at least 44 more intervals.
  expect(elapsedMs).toBeGreaterThanOrEqual(44 * 0.1 - 1);
});

test('a process sending one after the other makes one gate call per send: each confirmation rides on the next ask', async () => {
  const [c] = connect(1);
  const key = freshKey();
  const gate = new SendRateGate(c, key, 1_000, 0);
  const calls = jest.spyOn(c, 'evalsha');
  for (let i = 0; i < 30; i++) await gate.acquire();
  // The last grant's confirmation has no ask to ride on: it goes alone, in a check phase or two.
  await new Promise((r) => setTimeout(r, 50));
  const { asks, confirmOnly } = gateCalls(calls);
  expect(asks).toBeGreaterThanOrEqual(30);
  expect(confirmOnly).toBeLessThanOrEqual(3);
  // Every grant was recorded as sent, none is left pending.
  expect(await c.zcard(`${key}:sent`)).toBe(30);
  expect(await c.zcard(`${key}:pending`)).toBe(0);
});

test('an ask whose call fails does not lose the confirmations it carried', async () => {
  const [c] = connect(1);
  const key = freshKey();
  const gate = new SendRateGate(c, key, 1_000, 0);
  await gate.acquire();
  // The next ask carries the first grant's confirmation; its call fails (Redis dropped the connection).
  jest.spyOn(c, 'evalsha').mockImplementationOnce(() => Promise.reject(new Error('connection lost')));
  await expect(gate.acquire()).rejects.toThrow('connection lost');
  // The confirmation goes again on its own: the grant is recorded as sent, not left pending for PENDING_TTL_MS.
  const deadline = Date.now() + 2_000;
  while ((await c.zcard(`${key}:sent`)) < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  expect(await c.zcard(`${key}:sent`)).toBe(1);
  expect(await c.zcard(`${key}:pending`)).toBe(0);
});

test('a grant asked late takes its slot from the schedule, not from now: the lateness is caught up', async () => {
  const [c] = connect(1);
  const key = freshKey();
  const gate = new SendRateGate(c, key, 2, 5); // one decision per 502.5 ms
  await gate.acquire();
  const first = Number(await c.get(key));
  // The next slot was due 502.5 ms after the first: asked about 20 ms late (less than CATCH_UP_US however busy).
  await new Promise((r) => setTimeout(r, 520));
  await gate.acquire();
  // The decision is recorded at its slot, so the one after it is due 502.5 ms after that slot, not after the ask.
  expect(Number(await c.get(key)) - first).toBe(gateIntervalMicros(2, 5));
});

test('a gate idle for longer than CATCH_UP_US starts afresh: no burst of the slots it did not use', async () => {
  const [c] = connect(1);
  const key = freshKey();
  const gate = new SendRateGate(c, key, 20, 0); // one decision per 50 ms
  await gate.acquire();
  await new Promise((r) => setTimeout(r, (CATCH_UP_US / 1000) * 3));
  const grants: number[] = [];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      await gate.acquire();
      grants.push(performance.now());
    }),
  );
  // Four grants from an idle gate take three intervals again (150 ms), not the six slots left behind at once.
  expect(Math.max(...grants) - Math.min(...grants)).toBeGreaterThan(3 * 50 - 5);
});

test('a bulk call takes one grant per entry, pending until its one request is written; then all count as sent', async () => {
  // A receiver that reads nothing for 300 ms, and a body larger than the socket buffers: the write ends late.
  const server = http.createServer((req, res) => {
    req.pause();
    setTimeout(() => {
      req.resume();
      req.on('end', () => res.end('{}'));
    }, 300);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const [conn] = connect(1);
    const key = freshKey();
    // 5/s, no margin: five grants fill the window.
    const gate = new SendRateGate(conn, key, 5, 0);
    await gate.acquire(0, undefined, 5);
    const req = http.request({
      host: '127.0.0.1',
      port: (server.address() as AddressInfo).port,
      path: SES_BULK_SEND_PATH,
      method: 'POST',
      agent: false,
    });
    let written = 0;
    req.on('finish', () => (written = performance.now()));
    const answered = new Promise<void>((resolve, reject) => {
      req.on('response', (res) => res.resume().on('end', resolve));
      req.on('error', reject);
    });
    req.end(Buffer.alloc(32 * 1024 * 1024));
    // While the call is being written its five grants are pending, none yet sent.
    expect(await conn.zcard(`${key}:pending`)).toBe(5);
    expect(await conn.zcard(`${key}:sent`)).toBe(0);
    await answered;
    for (let i = 0; i < 100 && (await conn.zcard(`${key}:sent`)) < 5; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await conn.zcard(`${key}:sent`)).toBe(5);
    expect(await conn.zcard(`${key}:pending`)).toBe(0);
    // The window holds the five: the next grant comes a second after the call's write.
    await gate.acquire();
    expect(performance.now() - written).toBeGreaterThanOrEqual(1000 - 5);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a bulk ask beyond what the gate grants within maxWaitMs gives up at once, holding nothing', async () => {
  const [conn] = connect(1);
  const key = freshKey();
  const gate = new SendRateGate(conn, key, 10, 0);
  // 10/s grants 5 in 500 ms: an ask for 6 would wait longer.
  await expect(gate.acquire(0, 500, 6)).rejects.toBeInstanceOf(GateBusyError);
  expect(await conn.zcard(`${key}:pending`)).toBe(0);
  await gate.acquire(0, 500, 3);
  expect(await conn.zcard(`${key}:pending`)).toBe(3);
});

test("a bulk call's grants are decided together, in one script call; the decisions after wait out their intervals", async () => {
  const [conn] = connect(1);
  const key = freshKey();
  // 50/s, no margin: an interval of 20 ms.
  const gate = new SendRateGate(conn, key, 50, 0);
  const spy = jest.spyOn(conn, 'evalsha');
  try {
    await gate.acquire(0, undefined, 10);
    expect(gateCalls(spy).asks).toBe(1);
    expect(await conn.zcard(`${key}:pending`)).toBe(10);
    // The last decision stands ten intervals on from the first slot (an interval before now, the gate being
    // fresh): the next ask waits about 180 ms.
    const [s, us] = await conn.time();
    const now = Number(s) * 1e6 + Number(us);
    expect(Number(await conn.get(key)) - now).toBeGreaterThan(150_000);
  } finally {
    spy.mockRestore();
  }
});

test('a bulk ask never shares a script call with single asks: a single one with room is granted while the call waits for room for all', async () => {
  const [conn] = connect(1);
  const key = freshKey();
  // 10 sends per 3 s window (2 s margin), seven of them already sent now: room for three, for 3 s.
  const [s, us] = await conn.time();
  const now = String(Number(s) * 1e6 + Number(us));
  await conn.zadd(`${key}:sent`, ...Array.from({ length: 7 }, (_, i) => [now, `earlier:${i}`]).flat());
  const gate = new SendRateGate(conn, key, 10, 2000);
  let bulkGranted = false;
  // Asked in the same turn of the event loop as the single one.
  const bulk = gate.acquire(0, undefined, 5).then(
    () => (bulkGranted = true),
    () => undefined, // the connection closes under it when the test ends
  );
  await gate.acquire();
  // The single ask took one of the three places; the call of five, all or none, has none.
  expect(bulkGranted).toBe(false);
  const [pending, sent] = await Promise.all([conn.zcard(`${key}:pending`), conn.zcard(`${key}:sent`)]);
  expect(pending + sent).toBe(8);
  void bulk;
});

test('calls of several messages take the turn most urgent first: a transactional call goes before the campaign calls queued before it', async () => {
  const [conn] = connect(1);
  // 20/s, no margin: an interval of 50 ms.
  const gate = new SendRateGate(conn, freshKey(), 20, 0);
  const order: string[] = [];
  const call = (name: string, priority: number, count: number) =>
    gate.acquire(priority, undefined, count).then(() => void order.push(name));
  // The first campaign call holds the turn; the second waits; the transactional one arrives last.
  await Promise.all([call('campaign 1', 10, 5), call('campaign 2', 10, 5), call('transactional', 1, 2)]);
  expect(order).toEqual(['campaign 1', 'transactional', 'campaign 2']);
});

test('a call of more messages than a second holds is refused at once (the rate fell since it was sized)', async () => {
  const [conn] = connect(1);
  const gate = new SendRateGate(conn, freshKey(), 4, 0);
  await expect(gate.acquire(0, undefined, 5)).rejects.toBeInstanceOf(GateBusyError);
  await gate.acquire(0, undefined, 4);
});
