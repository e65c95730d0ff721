/**
 * `npm run bench -- smtp`: the SMTP relay beside the HTTP path in the same run. 1-recipient messages over 50
 * concurrent SMTP sessions (AUTH once per session, then one transaction per message) from two clients: a lean one
 * that pipelines `MAIL FROM`/`RCPT TO`/`DATA` (RFC 2920, two round trips a message; `./smtp-client`), and nodemailer's
 * pool (50 connections, one command at a time: four round trips). Each client over STARTTLS with a self-signed
 * certificate, over the local plain port (no TLS), and there again with a Message-ID of the client's in every message
 * (the idempotent path); against `POST /v1/send` with 1 recipient over 50 HTTP connections (autocannon), each server
 * in its own process (`npm run start:api`, `npm run start:smtp`), no worker, rate limit raised. The loads take turns
 * in `BENCH_ROUNDS` rounds (default 3) of `BENCH_SECONDS / rounds` each (default 9 s in all per load); emails/s is
 * over all rounds, p99 the median of the rounds'. Accepted emails are counted in Postgres too.
 *
 * Every client runs in the bench's own process and shares the machine's cores with the servers. CPU time per
 * accepted email is printed for the bench process (the client: autocannon, or the SMTP client) and for the server
 * of the load (the API or the relay; from `/proc/<pid>/stat`, 10 ms ticks), over the same windows: on a busy host
 * they say more than the rates.
 *
 * @module
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import nodemailer from 'nodemailer';
import type { Database } from '@mailroom/db/client';
import { freePort, waitForHttp } from '../test/support/services';
import { selfSignedFiles } from '../test/support/smtp';
import { LeanSmtpSession, SmtpReplyError } from './smtp-client';

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

/** A 1-recipient message's envelope and bytes (no two alike), with a Message-ID of the client's when `messageId`. */
function message(p: BenchProject, started: number, messageId: boolean): { from: string; to: string; raw: string } {
  const to = `s${n++}@bench.test`;
  // Raw bytes without a Message-ID (the relay adds one), or with the client's own (as composed messages carry: the
  // idempotent path, written with its idempotency row): the client does no MIME work, no two are the same.
  const id = messageId ? `Message-ID: <${to.replace('@', '.')}.${started}@${p.domain}>\r\n` : '';
  const raw = `From: b@${p.domain}\r\nTo: ${to}\r\n${id}Subject: Hello\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hi Ann</p>\r\n`;
  return { from: `b@${p.domain}`, to, raw };
}

/** The SMTP clients the bench drives: nodemailer's pool, or the lean pipelining one (`./smtp-client`). */
type SmtpClient = 'nodemailer' | 'pipelining';

/**
 * 50 sessions sending 1-recipient messages for `seconds` through `client`: messages accepted, and each one's
 * latency (ms, from its first command to the final 250).
 */
async function smtpLoad(
  port: number,
  p: BenchProject,
  seconds: number,
  tls: boolean,
  messageId: boolean,
  client: SmtpClient,
): Promise<{ messages: number; time: number; latencies: number[]; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  let send: (m: ReturnType<typeof message>, session: number) => Promise<unknown>;
  let close: () => void;
  if (client === 'nodemailer') {
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
    send = (m) => transport.sendMail({ envelope: { from: m.from, to: [m.to] }, raw: m.raw });
    close = () => transport.close();
  } else {
    // Each session opens (and authenticates) on its first message, in the timed window, as the pool's do.
    const sessions: (LeanSmtpSession | undefined)[] = [];
    send = async (m, i) => {
      const session = (sessions[i] ??= await LeanSmtpSession.open(port, tls, 'plunk', p.secretKey));
      await session.send(m.from, m.to, m.raw).catch((err: unknown) => {
        // A refused message keeps its session; a lost one is opened again.
        if (!(err instanceof SmtpReplyError)) sessions[i] = undefined;
        throw err;
      });
    };
    close = () => sessions.forEach((s) => s?.close());
  }
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      while (performance.now() < until) {
        const m = message(p, started, messageId);
        const t = performance.now();
        try {
          await send(m, i);
          latencies.push(performance.now() - t);
        } catch (err) {
          // The first refusal of a load is shown: the bench's figures mean nothing beside errors.
          if (errors++ === 0) console.error(`${client} on port ${port}: ${(err as Error).message}`);
        }
      }
    }),
  );
  const time = (performance.now() - started) / 1000;
  close();
  return { messages: latencies.length, time, latencies, errors };
}

/** CPU time (user + system, ms) a process has used so far, from `/proc/<pid>/stat` (0 where there is none). */
function processCpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 a second on Linux).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return 0;
  }
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
    for (const client of ['nodemailer', 'pipelining'] as const) {
      await smtpLoad(starttls, p, 1, true, false, client);
      await smtpLoad(plain, p, 1, false, false, client);
    }
    const smtpRun = (port: number, tls: boolean, messageId: boolean, client: SmtpClient) => async (s: number) =>
      smtpStats(await smtpLoad(port, p, s, tls, messageId, client));
    const loads = [
      { name: 'POST /v1/send (HTTP, 50 connections)', server: api, run: http },
      ...(['pipelining', 'nodemailer'] as const).flatMap((client) => [
        { name: `SMTP STARTTLS, ${client}`, server: smtp, run: smtpRun(starttls, true, false, client) },
        { name: `SMTP plain, ${client}`, server: smtp, run: smtpRun(plain, false, false, client) },
        { name: `SMTP plain, client Message-ID, ${client}`, server: smtp, run: smtpRun(plain, false, true, client) },
      ]),
    ];
    const got = loads.map(() => ({ messages: 0, time: 0, p99: [] as number[], errors: 0, client: 0, server: 0 }));
    for (let r = 0; r < rounds; r++) {
      for (const [i, l] of loads.entries()) {
        const [client, server] = [process.cpuUsage(), processCpuMs(l.server.pid)];
        const out = await l.run(seconds / rounds);
        const used = process.cpuUsage(client);
        got[i].client += (used.user + used.system) / 1000;
        got[i].server += processCpuMs(l.server.pid) - server;
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
        load: l.name,
        'emails/s': Math.round(rate),
        'p99 ms': Math.round(median(got[i].p99)),
        '÷ HTTP': (rate / httpRate).toFixed(2),
        'client CPU ms/email': (got[i].client / got[i].messages).toFixed(2),
        'server CPU ms/email': (got[i].server / got[i].messages).toFixed(2),
        errors: got[i].errors,
      });
    }
    const stored = await database.pool.query<{ n: string }>(`select count(*) as n from emails where project_id = $1`, [
      p.id,
    ]);
    console.log(
      `\nSMTP relay beside POST /v1/send, 1 recipient, 50 sessions or connections each (${seconds} s each in ${rounds} alternating rounds; ${stored.rows[0].n} emails stored in all, warm-up included)`,
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
