/**
 * `npm run bench -- verify`: `POST /v1/verify` requests/s (API in its own process, 10 connections) against a DNS
 * server on loopback (`dns2`, in this process):
 * - warm: every request for one domain whose answer is in the Redis cache (no DNS);
 * - cold: every request for a domain never seen (MX, then A/AAAA of the domain and of `www.`: 5 queries each).
 *
 * BENCH_VERIFY_REQUESTS sets the number of requests per run (default 5,000).
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import type { Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import { startDnsServer } from '../test/support/dns-server';
import { freePort, waitForHttp } from '../test/support/services';

type Spawn = (file: string, env: Record<string, string>) => ChildProcess;

/** Runs the benchmark and prints its table. @returns the rows. */
export async function benchVerify(
  env: Record<string, string>,
  _config: Config,
  _database: Database,
  p: { secretKey: string },
  spawnApp: Spawn,
  stop: (c: ChildProcess) => Promise<void>,
): Promise<Record<string, string | number>[]> {
  const total = Number(process.env.BENCH_VERIFY_REQUESTS ?? 5_000);
  const zone: Record<string, { MX?: { exchange: string; priority: number }[]; A?: string[] }> = {
    'warm.test': { MX: [{ exchange: 'mx.warm.test', priority: 10 }], A: ['192.0.2.1'] },
  };
  for (let i = 0; i < total; i++)
    zone[`d${i}.cold.test`] = { MX: [{ exchange: `mx.d${i}.cold.test`, priority: 10 }], A: ['192.0.2.2'] };
  const dns = await startDnsServer(zone);
  const port = await freePort();
  const api = spawnApp('apps/api/src/server.ts', {
    ...env,
    PORT: String(port),
    RATE_LIMIT_PER_MINUTE: '10000000',
    DNS_SERVERS: dns.server,
    DNS_TIMEOUT_MS: '1000',
  });
  await waitForHttp(`http://127.0.0.1:${port}/health/ready`, 30_000);
  const rows: Record<string, string | number>[] = [];
  try {
    for (const run of ['warm (cached domain)', 'cold (a new domain each request)'] as const) {
      let next = 0;
      const queriesBefore = dns.queries.length;
      const result = await autocannon({
        url: `http://127.0.0.1:${port}/v1/verify`,
        connections: 10,
        amount: total,
        requests: [
          {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${p.secretKey}` },
            setupRequest: (req) => {
              const n = next++;
              const email = run.startsWith('warm') ? `user${n}@warm.test` : `user@d${n}.cold.test`;
              return { ...req, body: JSON.stringify({ email }) };
            },
          },
        ],
      });
      rows.push({
        run,
        requests: result.requests.total,
        'per second': Math.round(result.requests.total / (result.duration || 1)),
        'p50 ms': result.latency.p50,
        'p99 ms': result.latency.p99,
        non2xx: result.non2xx,
        'DNS queries': dns.queries.length - queriesBefore,
      });
    }
  } finally {
    await stop(api);
    await dns.close();
  }
  console.log(`\nPOST /v1/verify (${total} requests per run, 10 connections, API in one process, DNS on loopback)`);
  console.table(rows);
  return rows;
}
