/**
 * An SES endpoint a test can make fail: a pass-through proxy (in the test's process) in front of an SES stack's
 * recorder, which in `5xx` mode answers every request (`SendEmail`, `GetAccount`, …) with 503
 * `ServiceUnavailable` as SES v2 does, and in `frozen` mode takes the request and never answers (the caller's
 * timeout ends it). `counts` tells how many requests each mode saw.
 */
import http from 'node:http';
import type net from 'node:net';

/** How the proxy treats requests. */
export type FailingMode = 'healthy' | '5xx' | 'frozen';

/** See the module notes. */
export class FailingSes {
  mode: FailingMode = 'healthy';
  /** Requests seen per mode (`send:` prefix: SendEmail calls). */
  readonly counts = new Map<string, number>();
  private readonly server: http.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly upstream: URL) {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** The proxy's URL (after {@link listen}). */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  /** SendEmail calls seen in `mode`. */
  sends(mode: FailingMode): number {
    return this.counts.get(`send:${mode}`) ?? 0;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const isSend = req.method === 'POST' && req.url === '/v2/email/outbound-emails';
      const mode = this.mode;
      const k = `${isSend ? 'send:' : ''}${mode}`;
      this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
      if (mode === 'frozen') return;
      if (mode === '5xx') {
        res
          .writeHead(503, {
            'content-type': 'application/json',
            'x-amzn-errortype': 'ServiceUnavailable:http://internal.amazon.com/coral/com.amazonaws.sesv2/',
          })
          .end(JSON.stringify({ message: 'Service is unavailable.' }));
        return;
      }
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
          answer.on('end', () => res.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(out)));
        },
      );
      up.on('error', () => res.writeHead(502).end());
      up.end(Buffer.concat(chunks));
    });
  }
}

/** Accepted (200) sends to any of `addresses` recorded by the recorder at `endpoint`. */
export async function acceptedAt(
  endpoint: string,
  addresses: string[],
): Promise<{ to: string[]; status: number; raw: string }[]> {
  const res = await fetch(`${endpoint}/__recorded`, { method: 'POST', body: JSON.stringify({ to: addresses }) });
  return ((await res.json()) as { to: string[]; status: number; raw: string }[]).filter((s) => s.status === 200);
}
