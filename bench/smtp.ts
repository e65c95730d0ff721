/**
 * `npm run bench -- smtp`: the SMTP relay beside the HTTP path in the same run. 1-recipient messages over 50
 * concurrent SMTP sessions (nodemailer's pool, 50 connections, STARTTLS with a self-signed certificate and AUTH
 * once per session, then MAIL/RCPT/DATA per message), over the local plain port (no TLS), and there again with a
 * Message-ID of the client's in every message (the idempotent path), against `POST
 * /v1/send` with 1 recipient over 50 HTTP connections (autocannon), each server in its own process (`npm run
 * start:api`, `npm run start:smtp`), no worker, rate limit raised. The loads take turns in `BENCH_ROUNDS` rounds
 * (default 3) of `BENCH_SECONDS / rounds` each (default 9 s in all per load); emails/s is over all rounds, p99 the
 * median of the rounds'. Accepted emails are counted in Postgres too.
 *
 * The SMTP client runs in the bench's own process and shares the machine's cores with the servers (autocannon's
 * HTTP client does too, more cheaply): the relay's figure is a floor.
 *
 * @module
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import nodemailer from 'nodemailer';
import type { Database } from '@mailroom/db/client';
import { freePort, waitForHttp } from '../test/support/services';
import { selfSignedFiles } from '../test/support/smtp';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;

interface BenchProject {
  id: string;
  secretKey: string;
  domain: string;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))] ?? 0;

/** Resolves once `port` accepts TCP connections. */
async function waitForPort(port: number, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} did not open within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

let n = 0;

/** 50 sessions sending 1-recipient messages for `seconds`: messages accepted, and each one's latency (ms). */
async function smtpLoad(
  port: number,
  p: BenchProject,
  seconds: number,
  tls: boolean,
  messageId = false,
): Promise<{ messages: number; time: number; latencies: number[]; errors: number }> {
  const transport = nodemailer.createTransport({
    pool: true,
    maxConnections: 50,
    maxMessages: Infinity,
    host: '127.0.0.1',
    port,
    requireTLS: tls,
    ignoreTLS: !tls,
    tls: { rejectUnauthorized: false },
    auth: { user: 'plunk', pass: p.secretKey },
  });
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (performance.now() < until) {
        const to = `s${n++}@bench.test`;
        // Raw bytes without a Message-ID (the relay adds one), or with the client's own (as nodemailer's composed
        // messages carry: the idempotent path, written in a transaction with its idempotency row): the client does no
        // MIME work, no two are the same.
        const id = messageId ? `Message-ID: <${to.replace('@', '.')}.${started}@${p.domain}>\r\n` : '';
        const raw = `From: b@${p.domain}\r\nTo: ${to}\r\n${id}Subject: Hello\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hi Ann</p>\r\n`;
        const t = performance.now();
        try {
          await transport.sendMail({ envelope: { from: `b@${p.domain}`, to: [to] }, raw });
          latencies.push(performance.now() - t);
        } catch {
          errors++;
        }
      }
    }),
  );
  const time = (performance.now() - started) / 1000;
  transport.close();
  return { messages: latencies.length, time, latencies, errors };
}

/** Runs the SMTP bench. @returns the printed rows. */
export async function benchSmtp(
  env: Record<string, string>,
  database: Database,
  p: BenchProject,
  spawnApp: Spawn,
  stop: (c: ChildProcess) => Promise<void>,
) {
  const seconds = Number(process.env.BENCH_SECONDS ?? 9);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const files = await selfSignedFiles();
  const [httpPort, starttls, plain] = [await freePort(), await freePort(), await freePort()];
  const common = { ...env, RATE_LIMIT_PER_MINUTE: '10000000' };
  const api = spawnApp('apps/api/src/server.ts', { ...common, PORT: String(httpPort) });
  const smtp = spawnApp('apps/api/src/smtp-server.ts', {
    ...common,
    SMTP_PORT: String(starttls),
    SMTP_TLS_PORT: '0',
    SMTP_PLAIN_PORT: String(plain),
    SMTP_ALLOW_INSECURE: 'true',
    SMTP_TLS_CERT_FILE: files.cert,
    SMTP_TLS_KEY_FILE: files.key,
  });
  const rows: Record<string, string | number>[] = [];
  try {
    await waitForHttp(`http://127.0.0.1:${httpPort}/health/ready`, 30_000);
    await waitForPort(starttls, 30_000);
    const http = async (s: number) => {
      const run = await autocannon({
        url: `http://127.0.0.1:${httpPort}/v1/send`,
        connections: 50,
        duration: s,
        requests: [
          {
            method: 'POST',
            setupRequest: (req) => ({
              ...req,
              headers: { authorization: `Bearer ${p.secretKey}`, 'content-type': 'application/json' },
              body: JSON.stringify({
                to: `h${n++}@bench.test`,
                from: `b@${p.domain}`,
                subject: 'Hello',
                body: '<p>Hi Ann</p>',
              }),
            }),
          },
        ],
      });
      return { messages: run['2xx'], time: run.duration, p99: run.latency.p99, errors: run.non2xx + run.errors };
    };
    // Warm-up: JIT, pools, the auth caches.
    await http(2);
    await smtpLoad(starttls, p, 2, true);
    await smtpLoad(plain, p, 2, false);
    const loads = [
      { name: 'POST /v1/send (HTTP, 50 connections)', run: http },
      {
        name: 'SMTP STARTTLS (50 sessions)',
        run: async (s: number) => smtpStats(await smtpLoad(starttls, p, s, true)),
      },
      {
        name: 'SMTP plain, local (50 sessions)',
        run: async (s: number) => smtpStats(await smtpLoad(plain, p, s, false)),
      },
      {
        name: 'SMTP plain, client Message-ID (50 sessions)',
        run: async (s: number) => smtpStats(await smtpLoad(plain, p, s, false, true)),
      },
    ];
    const got = loads.map(() => ({ messages: 0, time: 0, p99: [] as number[], errors: 0 }));
    for (let r = 0; r < rounds; r++) {
      for (const [i, l] of loads.entries()) {
        const out = await l.run(seconds / rounds);
        got[i].messages += out.messages;
        got[i].time += out.time;
        got[i].p99.push(out.p99);
        got[i].errors += out.errors;
      }
    }
    const httpRate = got[0].messages / got[0].time;
    for (const [i, l] of loads.entries()) {
      const rate = got[i].messages / got[i].time;
      rows.push({
        load: `${l.name}, 1 recipient`,
        'emails/s': Math.round(rate),
        'p99 ms': Math.round(median(got[i].p99)),
        '÷ HTTP': (rate / httpRate).toFixed(2),
        errors: got[i].errors,
      });
    }
    const stored = await database.pool.query<{ n: string }>(`select count(*) as n from emails where project_id = $1`, [
      p.id,
    ]);
    console.log(
      `\nSMTP relay beside POST /v1/send (${seconds} s each in ${rounds} alternating rounds; ${stored.rows[0].n} emails stored in all, warm-up included)`,
    );
    console.table(rows);
  } finally {
    await Promise.all([stop(api), stop(smtp)]);
  }
  return rows;
}

function smtpStats(r: Awaited<ReturnType<typeof smtpLoad>>) {
  return { messages: r.messages, time: r.time, p99: p99(r.latencies), errors: r.errors };
}
