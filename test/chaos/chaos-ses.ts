/**
 * The SES endpoint of the SES chaos tests (`ses.test.ts`, `ses-campaign.test.ts`): a proxy in front of the
 * recording proxy whose behaviour the test switches (healthy, 5xx, throttled, refused, frozen), and the worker
 * process that talks to it, with what it logged counted. A `SendBulkEmail` call is met as a `SendEmail` is: the
 * whole request answered with the fault (a frozen one passed on to SES every second time), each of its emails
 * counted by its `email_id` tag.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
/** The worker's `SES_TIMEOUT_MS` in these tests. */
export const SES_TIMEOUT_MS = 2_000;

export type Mode = 'healthy' | '5xx' | 'throttle' | 'refused' | 'frozen';

export interface Seen {
  mode: Mode;
  emailId: string | undefined;
  /** The emails of a `SendBulkEmail` call (their `email_id` tags); a `SendEmail`'s one. */
  emailIds: string[];
  at: number;
  /** When the worker gave up on a frozen request (its socket closed). */
  closedAt?: number;
  /** A frozen request that was passed on to SES (answer dropped). */
  forwarded?: boolean;
}

/** The SES endpoint the worker sees: a pass-through proxy whose behaviour the test switches. */
export class ChaosSes {
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
      const isBulk = req.method === 'POST' && req.url === '/v2/email/outbound-bulk-emails';
      if (!(isSend || isBulk) || this.mode === 'healthy') return this.forward(req, body, res);
      const emailIds = isBulk ? bulkEmailIds(body) : [emailIdOf(body)].filter((id): id is string => !!id);
      const seen: Seen = { mode: this.mode, emailId: emailIds[0], emailIds, at: Date.now() };
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

/** The `email_id` tags of a SendBulkEmail request's entries. */
function bulkEmailIds(body: Buffer): string[] {
  try {
    const entries =
      (JSON.parse(body.toString()) as { BulkEmailEntries?: { ReplacementTags?: { Name: string; Value: string }[] }[] })
        .BulkEmailEntries ?? [];
    return entries.flatMap((e) => (e.ReplacementTags ?? []).filter((t) => t.Name === 'email_id').map((t) => t.Value));
  } catch {
    return [];
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
export function spawnChaosWorker(env: Record<string, string>) {
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
