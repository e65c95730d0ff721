/**
 * Chaos: SES refusing, then frozen, then healthy again, under a steady stream of `POST /v1/send`. The worker (a
 * process of its own) talks to SES through a proxy of this test's, in front of the recording proxy and the
 * emulator, that plays in turn:
 *
 * 1. `5xx`: every SendEmail answered 500 `InternalFailure` or 503 `ServiceUnavailable` (transient: retried with
 *    backoff, spending an attempt);
 * 2. `throttle`: 429 `TooManyRequestsException` (retried later, no attempt spent, the queue paused);
 * 3. `refused`: the port closed and every open connection cut (ECONNREFUSED / reset);
 * 4. `frozen`: the connection accepted, the request read, no answer ever. Every second frozen request is
 *    passed on to SES first (its answer is dropped): a request SES *processed* whose answer was lost, as a real
 *    network can do. The worker cannot know SES took it, so after the timeout it sends that message again, with
 *    the same Message-ID. Those, and only those, may reach SES twice; the test counts them.
 * 5. `healthy`: everything passed on.
 *
 * Survived means: the worker process still running and ready; every frozen call given up by the worker within
 * the SES timeout (plus a wide margin for a busy machine); every accepted email `sent` once SES is healthy, none
 * `failed` because of a transient refusal; duplicates only among frozen requests passed on to SES.
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import request from 'supertest';
import { loadConfig } from '@mailroom/config/config';
import {
  createTestProject,
  exited,
  isolatedDatabase,
  recipient,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { statusCounts, survival } from './survival';
import { toSummary } from '../support/summary';

const ROOT = path.resolve(__dirname, '../..');
const SES_TIMEOUT_MS = 2_000;

type Mode = 'healthy' | '5xx' | 'throttle' | 'refused' | 'frozen';

interface Seen {
  mode: Mode;
  emailId: string | undefined;
  at: number;
  /** When the worker gave up on a frozen request (its socket closed). */
  closedAt?: number;
  /** A frozen request that was passed on to SES (answer dropped). */
  forwarded?: boolean;
}

/** The SES endpoint the worker sees: a pass-through proxy whose behaviour the test switches. */
class ChaosSes {
  mode: Mode = 'healthy';
  readonly seen: Seen[] = [];
  private server!: http.Server;
  private readonly sockets = new Set<net.Socket>();
  private frozenCount = 0;
  port = 0;

  constructor(private readonly upstream: URL) {}

  async listen(): Promise<void> {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async setMode(mode: Mode): Promise<void> {
    if (mode === 'refused') {
      // Nothing listens on the port any more, and every pooled keep-alive connection is cut.
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      for (const s of this.sockets) s.destroy();
      // Wait for the port to be closed (every connection is cut, so it closes at once): only then is it 'refused'.
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the chaos SES proxy did not close its port within 10 s')), 10_000);
      });
      await Promise.race([closed, deadline]).finally(() => clearTimeout(timer));
    } else if (this.mode === 'refused') {
      await this.listen();
    }
    this.mode = mode;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const isSend = req.method === 'POST' && req.url === '/v2/email/outbound-emails';
      if (!isSend || this.mode === 'healthy') return this.forward(req, body, res);
      const seen: Seen = { mode: this.mode, emailId: emailIdOf(body), at: Date.now() };
      this.seen.push(seen);
      const error = (status: number, type: string, message: string) =>
        res
          .writeHead(status, {
            'content-type': 'application/json',
            'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazonaws.sesv2/`,
          })
          .end(JSON.stringify({ message }));
      if (this.mode === '5xx') {
        if (this.seen.length % 2)
          error(500, 'InternalFailure', 'The request processing has failed because of an unknown error.');
        else error(503, 'ServiceUnavailable', 'Service is unavailable.');
      } else if (this.mode === 'throttle') {
        error(429, 'TooManyRequestsException', 'Maximum sending rate exceeded.');
      } else {
        // Frozen: never answer. The worker's timeout must end the wait.
        req.socket.once('close', () => (seen.closedAt = Date.now()));
        if (this.frozenCount++ % 2 === 0) {
          seen.forwarded = true;
          this.forward(req, body, undefined);
        }
      }
    });
  }

  /** Passes a request on to the recorder; answers `res` with its answer (dropped when `res` is undefined). */
  private forward(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse | undefined): void {
    const up = http.request(
      {
        host: this.upstream.hostname,
        port: this.upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
      },
      (answer) => {
        const out: Buffer[] = [];
        answer.on('data', (c: Buffer) => out.push(c));
        answer.on('end', () => res?.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(out)));
      },
    );
    up.on('error', () => res?.writeHead(502).end());
    up.end(body);
  }
}

/** Message-ID local part (= email id) of a SendEmail request's raw MIME. */
function emailIdOf(body: Buffer): string | undefined {
  try {
    const raw = Buffer.from(
      (JSON.parse(body.toString()) as { Content?: { Raw?: { Data?: string } } }).Content?.Raw?.Data ?? '',
      'base64',
    ).toString('utf8');
    return /^Message-ID:\s*<([^@>]+)@/im.exec(raw)?.[1];
  } catch {
    return undefined;
  }
}

/** The worker process, with what it logged (counted, since it logs a line per failed attempt). */
function spawnChaosWorker(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'apps/worker/src/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      WORKER_HEALTH_PORT: '0',
      TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'),
      LOG_LEVEL: 'info',
      SES_TIMEOUT_MS: String(SES_TIMEOUT_MS),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const state = {
    child,
    healthPort: 0,
    tail: [] as string[],
    counts: { refused: 0, timeout: 0, serverError: 0, throttled: 0, failed: 0 },
  };
  let partial = '';
  const keep = (d: Buffer) => {
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const l of lines) {
      if (!l || l.includes('"email sent"')) continue;
      const started = /"healthPort":(\d+).*"worker started"/.exec(l);
      if (started) state.healthPort = Number(started[1]);
      if (l.includes('send deferred: transient failure') || l.includes('send deferred: SES unreachable')) {
        if (/ECONNREFUSED|ECONNRESET|socket hang up/.test(l)) state.counts.refused++;
        else if (/TimeoutError/.test(l)) state.counts.timeout++;
        else if (/InternalFailure|ServiceUnavailable/.test(l)) state.counts.serverError++;
      }
      if (l.includes('SES throttled')) state.counts.throttled++;
      if (/send failed/.test(l)) state.counts.failed++;
      state.tail.push(l);
      if (state.tail.length > 100) state.tail.shift();
    }
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return state;
}

describe('SES refusing, then frozen, then healthy again', () => {
  let iso: { url: string; drop: () => Promise<void> };
  let ses: ChaosSes;
  let api: TestApi;
  let p: TestProject;
  let worker: ReturnType<typeof spawnChaosWorker>;

  beforeAll(async () => {
    iso = await isolatedDatabase();
    ses = new ChaosSes(new URL(process.env.TEST_SES_ENDPOINT!));
    await ses.listen();
    const env = testEnv({
      DATABASE_URL: iso.url,
      SES_ENDPOINT: `http://127.0.0.1:${ses.port}`,
      SES_MAX_SEND_RATE: '50',
      WORKER_CONCURRENCY: '4',
      // Refusals and timeouts spend no attempt (SES unreachable); the 2 s of 5xx answers do (100 ms doubling).
      SEND_BACKOFF_MS: '100',
      SEND_MAX_ATTEMPTS: '20',
      // Longer than the SES timeout: a frozen call ends while the claim is still this worker's.
      SEND_LEASE_MS: '8000',
      RECONCILE_INTERVAL_MS: '1000',
      RECONCILE_AFTER_MS: '5000',
      RATE_LIMIT_PER_MINUTE: '100000',
    });
    api = await startTestApi(loadConfig(env));
    p = await createTestProject(api.database);
    worker = spawnChaosWorker(env);
    await waitFor(async () => worker.healthPort > 0 || worker.child.exitCode !== null, 30_000, 'the worker to start');
    if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.tail.join('\n')}`);
  }, 60_000);

  afterAll(async () => {
    if (worker) {
      worker.child.kill('SIGKILL');
      await exited(worker.child);
    }
    await api?.close();
    await ses?.close();
    await iso?.drop();
  });

  test('the worker lives, frozen calls time out, every accepted email is sent once SES is healthy, none failed', async () => {
    const accepted = new Map<string, string>(); // address → email id
    const statuses = new Map<number, number>();
    let requests = 0;
    let sending = true;

    // A steady stream: one request every ~100 ms (pacing the load, not waiting for state). It stops when the
    // faults are over, or when the test fails (finally below), or after 90 s at the latest.
    const streamDeadline = Date.now() + 90_000;
    const stream = (async () => {
      while (sending && Date.now() < streamDeadline) {
        const to = recipient('ses');
        requests++;
        const res = await request(api.app)
          .post('/v1/send')
          .set('Authorization', p.auth)
          .send({ to, from: `s@${p.domain}`, subject: 'ses', body: '<p>ses</p>' });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 202) accepted.set(to, res.body.data.emails[0].email);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    const seenIn = (mode: Mode) => ses.seen.filter((s) => s.mode === mode).length;
    try {
      const delivered = async () => (await survival([...accepted.keys()], [...accepted.values()])).delivered;
      await waitFor(async () => (await delivered()) >= 3 || undefined, 30_000, '3 deliveries while healthy');

      // Each fault lasts 2 s and must have met at least one SendEmail (the refused one is seen in the worker's log).
      const phase = async (mode: Mode, met: () => boolean) => {
        await ses.setMode(mode);
        const started = Date.now();
        await waitFor(
          async () => (Date.now() - started >= 2_000 && met()) || undefined,
          30_000,
          `a send to meet SES ${mode}`,
        );
      };
      await phase('5xx', () => seenIn('5xx') > 0);
      await phase('throttle', () => seenIn('throttle') > 0);
      await phase('refused', () => worker.counts.refused > 0);
      await phase('frozen', () => seenIn('frozen') > 0);
      await ses.setMode('healthy');
    } finally {
      sending = false;
      await stream;
    }

    // Every frozen call was given up by the worker within the timeout (a wide margin for a busy machine).
    const frozen = ses.seen.filter((s) => s.mode === 'frozen');
    await waitFor(
      async () => frozen.every((s) => s.closedAt !== undefined) || undefined,
      SES_TIMEOUT_MS + 10_000,
      'the worker to give up every frozen call',
    );
    const waits = frozen.map((s) => s.closedAt! - s.at);
    // Really frozen until the worker's timeout (the proxy's clock starts once the body is in, a little late).
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(SES_TIMEOUT_MS / 2);
    expect(Math.max(...waits)).toBeLessThan(SES_TIMEOUT_MS + 8_000);

    const ids = [...accepted.values()];
    await waitFor(
      async () => (await statusCounts(api.database, ids)).sent === ids.length || undefined,
      60_000,
      'every accepted email sent',
    ).catch(async (err) => {
      throw new Error(
        `${(err as Error).message}: ${JSON.stringify(await statusCounts(api.database, ids))}\nworker:\n${worker.tail.slice(-30).join('\n')}`,
      );
    });
    const s = await survival([...accepted.keys()], ids);
    const forwarded = new Set(frozen.filter((f) => f.forwarded).map((f) => f.emailId));
    const c = worker.counts;
    const otherFive = [...statuses].filter(([st]) => st >= 500).reduce((n, [, k]) => n + k, 0);
    toSummary(
      `chaos ses: ${requests} requests, ${statuses.get(202) ?? 0} 202, ${otherFive} 5xx; SES answered ${seenIn('5xx')} 5xx and ${seenIn('throttle')} 429, ` +
        `worker saw ${c.refused} refused connections, ${c.timeout} timeouts (${frozen.length} frozen calls, ${forwarded.size} of them processed by SES, ` +
        `given up after ${Math.min(...waits)}-${Math.max(...waits)} ms at a ${SES_TIMEOUT_MS} ms timeout); ` +
        `emails accepted ${ids.length}, delivered ${s.delivered}, failed ${c.failed}, lost ${s.lost.length}, duplicated ${s.duplicated.length} (allowed: frozen and processed ${forwarded.size})`,
    );

    expect(worker.child.exitCode).toBeNull();
    expect((await fetch(`http://127.0.0.1:${worker.healthPort}/health/ready`)).status).toBe(200);
    expect(otherFive).toBe(0);
    expect(c.serverError).toBeGreaterThan(0);
    expect(c.throttled).toBeGreaterThan(0);
    expect(c.failed).toBe(0);
    expect(s.lost).toEqual([]);
    // Only a request SES processed without the worker hearing so is sent twice (same Message-ID).
    expect(s.duplicated.filter((id) => !forwarded.has(id))).toEqual([]);
    expect(s.duplicated.length).toBeLessThanOrEqual(forwarded.size);
  }, 120_000);
});
