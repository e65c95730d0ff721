/**
 * The TLS front of deploy/compose.production.yml, run for real without a container engine: Debian's `caddy` with
 * deploy/caddy/Caddyfile itself, in front of an API listening on loopback, with a worker behind it. Caddy issues
 * the site's certificate from its internal CA (`local_certs`, the stand-in for ACME here: no public DNS), listens on
 * free loopback ports with its admin endpoint off, and keeps its data (the CA) in a temporary directory. The client
 * trusts only that CA's root certificate, so a request that succeeds went through TLS that verified.
 *
 * Also `caddy validate` on the production form of the Caddyfile (a real domain, ACME), which checks it without
 * contacting a CA.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { Server } from 'node:http';
import type { TLSSocket } from 'node:tls';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '@mailroom/config/config';
import { listenOn } from '@mailroom/platform/process';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { expressServerOptions } from '../../apps/api/src/http/server-classes';
import { createTestProject, exited, recipient, sesSendsTo, startTestApi, testEnv, waitFor, type TestApi, type TestProject } from '../support/harness';
import { which } from '../support/provision';
import { freePort } from '../support/services';

const ROOT = path.resolve(__dirname, '..', '..');
const CADDYFILE = path.join(ROOT, 'deploy', 'caddy', 'Caddyfile');

function caddyBin(): string {
  const bin = which('caddy');
  if (!bin) throw new Error("caddy not found on PATH: test setup installs Debian's caddy (apt-get install caddy)");
  return bin;
}

interface Answer {
  status: number;
  body: string;
  alpn: string | false | null;
  issuer: string;
}

/** One HTTPS request trusting only `ca` (undefined: the system's trust store). */
function httpsRequest(url: string, ca: Buffer | undefined, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: options.method ?? 'GET', headers: options.headers, ca }, (res) => {
      const socket = res.socket as TLSSocket;
      const cn = socket.getPeerCertificate().issuer?.CN ?? '';
      const issuer = Array.isArray(cn) ? cn.join(', ') : cn;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, alpn: socket.alpnProtocol, issuer }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer from ${url} within 10 s`)));
    req.end(options.body);
  });
}

describe('Caddy (deploy/caddy/Caddyfile) in front of a running API', () => {
  let api: TestApi;
  let server: Server;
  let worker: RunningWorker;
  let caddy: ChildProcess;
  let dir: string;
  let ca: Buffer;
  let base: string;
  let p: TestProject;
  const caddyOutput: string[] = [];

  beforeAll(async () => {
    const config = loadConfig(testEnv({ TRUST_PROXY: 'loopback' }));
    api = await startTestApi(config);
    // Served as `apps/api/src/server.ts` serves it: requests born with the app's prototypes.
    server = await listenOn(api.app, 0, 'test api', expressServerOptions(api.app));
    worker = await startWorker(config, { healthPort: 0 });
    p = await createTestProject(api.database);

    dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-caddy-'));
    const [httpPort, httpsPort] = [await freePort(), await freePort()];
    base = `https://localhost:${httpsPort}`;
    caddy = spawn(caddyBin(), ['run', '--config', CADDYFILE, '--adapter', 'caddyfile'], {
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        XDG_DATA_HOME: path.join(dir, 'data'),
        XDG_CONFIG_HOME: path.join(dir, 'config'),
        MAILROOM_DOMAIN: `localhost:${httpsPort}`,
        ACME_EMAIL: 'ops@example.com',
        MAILROOM_UPSTREAM: `127.0.0.1:${(server.address() as { port: number }).port}`,
        // The internal CA instead of ACME, not added to the system's trust store; no admin endpoint; free ports.
        CADDY_GLOBAL_OPTIONS: ['local_certs', 'skip_install_trust', 'admin off', `http_port ${httpPort}`, `https_port ${httpsPort}`].join('\n\t'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer) => caddyOutput.push(...d.toString().split('\n').filter(Boolean).slice(-50));
    caddy.stdout!.on('data', keep);
    caddy.stderr!.on('data', keep);
    const root = path.join(dir, 'data', 'caddy', 'pki', 'authorities', 'local', 'root.crt');
    await waitFor(async () => existsSync(root) || caddy.exitCode !== null, 20_000, "Caddy's local CA").catch((err: Error) => {
      throw new Error(`${err.message}\n${caddyOutput.join('\n')}`);
    });
    if (caddy.exitCode !== null) throw new Error(`caddy exited with ${caddy.exitCode}:\n${caddyOutput.join('\n')}`);
    ca = readFileSync(root);
    // Ready once the API answers through it (its active health check has passed).
    await waitFor(async () => (await httpsRequest(`${base}/health/ready`, ca).catch(() => undefined))?.status === 200, 30_000, 'the API through Caddy').catch(
      (err: Error) => {
        throw new Error(`${err.message}\n${caddyOutput.join('\n')}`);
      },
    );
  });

  afterAll(async () => {
    if (caddy && caddy.exitCode === null) {
      caddy.kill('SIGTERM');
      await exited(caddy);
    }
    await worker?.stop();
    await new Promise((r) => server?.close(r));
    await api?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('an email sent over HTTPS (certificate verified against Caddy\'s CA) is accepted and delivered', async () => {
    const to = recipient('tls');
    const res = await httpsRequest(`${base}/v1/send`, ca, {
      method: 'POST',
      headers: { authorization: p.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ to, from: `tls@${p.domain}`, subject: 'over TLS', body: '<p>hello</p>' }),
    });
    expect(res.status).toBe(202);
    expect(res.issuer).toMatch(/Caddy Local Authority/);
    expect((JSON.parse(res.body) as { success: boolean }).success).toBe(true);
    const sends = await waitFor(async () => {
      const s = await sesSendsTo([to]);
      return s.length > 0 && s;
    }, 30_000, 'the email at SES');
    expect(sends).toHaveLength(1);
  });

  test("a client trusting only the system's CAs refuses the certificate (Caddy's CA was not installed anywhere)", async () => {
    await expect(httpsRequest(`${base}/health/live`, undefined)).rejects.toThrow(/certificate|self.signed|issuer/i);
  });

  test('/metrics is not served to the internet (Prometheus scrapes the API directly)', async () => {
    expect((await httpsRequest(`${base}/metrics`, ca, { headers: { authorization: 'Bearer anything-at-all-0123' } })).status).toBe(404);
  });
});

test('caddy validate: the production form (a real domain, ACME) is a valid configuration', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-caddy-validate-'));
  try {
    const r = spawnSync(caddyBin(), ['validate', '--config', CADDYFILE, '--adapter', 'caddyfile'], {
      env: { PATH: process.env.PATH, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir, MAILROOM_DOMAIN: 'mail.example.com', ACME_EMAIL: 'ops@example.com' },
      encoding: 'utf8',
    });
    expect({ status: r.status, output: `${r.stdout}${r.stderr}` }).toEqual({ status: 0, output: expect.stringContaining('Valid configuration') });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
