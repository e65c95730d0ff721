/**
 * A webhook receiver on loopback: records every request (headers, raw body, time) and answers 500 to the first
 * `failFirst` requests, then 200; while held, it records requests and never answers them.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
  at: number;
}

export interface Receiver {
  url: string;
  received: ReceivedWebhook[];
  /** Answers 500 to the next `n` requests. */
  failNext(n: number): void;
  /** While on, requests are recorded and never answered (a target that hangs). */
  hold(on: boolean): void;
  close(): Promise<void>;
}

/** Starts a receiver. */
export async function startReceiver(failFirst = 0): Promise<Receiver> {
  let failures = failFirst;
  let holding = false;
  const received: ReceivedWebhook[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      if (holding) {
        received.push({ headers: req.headers, body, status: 0, at: Date.now() });
        return;
      }
      const status = failures > 0 ? 500 : 200;
      if (failures > 0) failures--;
      received.push({ headers: req.headers, body, status, at: Date.now() });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'temporarily broken');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    failNext: (n) => (failures = n),
    hold: (on) => (holding = on),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Verifies a Standard Webhooks signature independently of the library that made it: HMAC-SHA256 under the
 * base64-decoded secret (after `whsec_`) of `id.timestamp.body`, compared with every `v1,` signature listed.
 */
export function verifyStandardWebhook(secret: string, r: ReceivedWebhook): boolean {
  const id = String(r.headers['webhook-id']);
  const ts = String(r.headers['webhook-timestamp']);
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${r.body}`).digest();
  return String(r.headers['webhook-signature'])
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .some((s) => {
      const given = Buffer.from(s.slice(3), 'base64');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
}
