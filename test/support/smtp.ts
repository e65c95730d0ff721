/**
 * The SMTP relay under test: started in-process on free ports with a self-signed certificate (written to a
 * temporary directory, as an operator's PEM files), beside an in-process API of the same configuration; and a
 * nodemailer client for it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { generate } from 'selfsigned';
import nodemailer from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { createLogger } from '@mailroom/platform/logger';
import type { Config } from '@mailroom/config/config';
import { createDatabase, type Database } from '@mailroom/db/client';
import { AuthCache } from '../../apps/api/src/http/auth';
import { authFailureLimiter } from '../../apps/api/src/http/rate-limit';
import { startSmtpRelay, type SmtpRelay } from '../../apps/api/src/smtp/relay';
import type { Redis } from 'ioredis';
import type { Queues } from '@mailroom/queues/create';
import type { TestApi } from './harness';

let certFiles: { cert: string; key: string } | undefined;

/** PEM files of a self-signed certificate for `localhost`/127.0.0.1 (made once per test file). */
export async function selfSignedFiles(): Promise<{ cert: string; key: string }> {
  if (certFiles) return certFiles;
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], { keySize: 2048, algorithm: 'sha256' });
  const dir = mkdtempSync(path.join(tmpdir(), 'mailroom-smtp-'));
  certFiles = { cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') };
  writeFileSync(certFiles.cert, pems.cert);
  writeFileSync(certFiles.key, pems.private);
  return certFiles;
}

/** The environment of a relay under test: its certificate files (call before `testConfig`). */
export async function smtpEnv(overrides: Record<string, string> = {}): Promise<Record<string, string>> {
  const files = await selfSignedFiles();
  return { SMTP_TLS_CERT_FILE: files.cert, SMTP_TLS_KEY_FILE: files.key, ...overrides };
}

/** A running relay: its ports, the Postgres pool it writes through, its auth cache. */
export interface TestRelay {
  relay: SmtpRelay;
  starttlsPort: number;
  tlsPort: number;
  plainPort: number | undefined;
  database: Database;
  authCache: AuthCache;
  close(): Promise<void>;
}

/**
 * Starts the relay on free ports with the API's Redis and queues (so its jobs are the API's), and a Postgres pool of
 * its own (`databaseUrl`: default the config's; a test may route it through a proxy it can cut).
 */
export async function startTestRelay(
  api: TestApi,
  config: Config = api.config,
  databaseUrl = config.databaseUrl,
  connections: { redis: Redis; queues: Queues } = api,
): Promise<TestRelay> {
  const database = createDatabase({ url: databaseUrl, poolSize: 4, applicationName: 'test-smtp' });
  const authCache = new AuthCache(config.authCacheTtlMs, config.authNegativeCacheTtlMs);
  const { redis, queues } = connections;
  const relay = await startSmtpRelay(
    {
      config,
      database,
      redis,
      queues,
      logger: createLogger(config, 'smtp'),
      authCache,
      authFailures: authFailureLimiter(redis, config),
    },
    { starttls: 0, tls: 0, ...(config.smtpAllowInsecure ? { plain: 0 } : {}) },
  );
  const port = (kind: string) => relay.listeners.find((l) => l.kind === kind)?.port;
  return {
    relay,
    starttlsPort: port('starttls')!,
    tlsPort: port('tls')!,
    plainPort: port('plain'),
    database,
    authCache,
    close: async () => {
      await relay.close();
      await database.close();
    },
  };
}

/** A nodemailer transport to the relay: STARTTLS (required) on `port`, or implicit TLS with `secure`. */
export function smtpClient(
  port: number,
  pass: string,
  opts: { secure?: boolean; ignoreTLS?: boolean; user?: string; pool?: boolean } = {},
): nodemailer.Transporter<SMTPTransport.SentMessageInfo> {
  return nodemailer.createTransport({
    ...(opts.pool ? { pool: true, maxConnections: 1 } : {}),
    host: '127.0.0.1',
    port,
    secure: opts.secure ?? false,
    requireTLS: !opts.secure && !opts.ignoreTLS,
    ignoreTLS: opts.ignoreTLS ?? false,
    tls: { rejectUnauthorized: false },
    auth: { user: opts.user ?? 'plunk', pass },
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  });
}

/** A TCP proxy (to Postgres by default, or Redis) that a test can cut (every connection dropped, new ones refused) and restore. */
export async function cuttableProxy(
  target = { host: '127.0.0.1', port: 5432 },
): Promise<{ port: number; cut(): void; restore(): void; close(): Promise<void> }> {
  let open = true;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (!open) return client.destroy();
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => {
      open = false;
      for (const s of sockets) s.destroy();
    },
    restore: () => {
      open = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
