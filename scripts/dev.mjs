#!/usr/bin/env node
// `npm run dev`: everything a newcomer needs on one machine. Installs if needed, makes sure Postgres and Redis
// answer (starting local ones when their binaries are installed), migrates, starts the SES emulator (inbox at
// http://localhost:8005), the API and the worker (restarted on change), creates a development project with a
// verified example.com domain, and prints its keys and a curl that sends an email.
//
// Its DATABASE_URL and REDIS_URL are the ones docker-compose.yml publishes on 127.0.0.1, so
// `docker compose up -d postgres redis` then `npm run dev` works; a local Postgres that refuses the URL's login (a
// fresh Debian/Ubuntu one: peer on the socket, scram over TCP) gets the role made for it (dev-postgres.mjs).
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensurePostgresLogin } from './dev-postgres.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

const env = {
  ...process.env,
  NODE_ENV: process.env.NODE_ENV ?? 'development',
  DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/mailroom',
  REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  SES_ENDPOINT: process.env.SES_ENDPOINT ?? 'http://127.0.0.1:8005',
  AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID ?? 'local',
  AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY ?? 'local',
  ADMIN_TOKEN: process.env.ADMIN_TOKEN ?? 'dev-admin-token-change-me',
  LOG_PRETTY: process.env.LOG_PRETTY ?? 'true',
  PORT: process.env.PORT ?? '8080',
};
const port = env.PORT;

function answers(url, fallbackPort) {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: u.hostname, port: Number(u.port || fallbackPort) });
    socket.setTimeout(1000);
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('timeout', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(false));
  });
}

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function ensure(name, url, defaultPort, start, howTo) {
  if (await answers(url, defaultPort)) return;
  if (start()) {
    for (let i = 0; i < 30; i++) {
      if (await answers(url, defaultPort)) return console.log(`started a local ${name}`);
      await sleep(500);
    }
  }
  console.error(`\n${name} is not answering at ${url}.\n${howTo}\n`);
  process.exit(1);
}

if (!existsSync(path.join(root, 'node_modules'))) {
  console.log('installing dependencies (npm install)…');
  execFileSync('npm', ['install', '--no-audit', '--no-fund'], { stdio: 'inherit' });
}

await ensure(
  'Postgres',
  env.DATABASE_URL,
  5432,
  () => {
    if (!has('pg_ctlcluster') || !existsSync('/etc/postgresql')) return false;
    const versions = execFileSync('ls', ['/etc/postgresql']).toString().trim().split('\n');
    return (
      spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', versions[versions.length - 1], 'main', 'start'], {
        stdio: 'inherit',
      }).status === 0
    );
  },
  'Install it (Debian/Ubuntu: sudo apt-get install postgresql; macOS: brew install postgresql) or run\n  docker compose up -d postgres\nthen set DATABASE_URL if it is not postgres://postgres:postgres@127.0.0.1:5432/mailroom.',
);

const login = await ensurePostgresLogin(env.DATABASE_URL);
if (!login.ok) {
  console.error(`\n${login.message}\n`);
  process.exit(1);
}

await ensure(
  'Redis',
  env.REDIS_URL,
  6379,
  () => {
    if (!has('redis-server')) return false;
    return (
      spawnSync(
        'redis-server',
        ['--daemonize', 'yes', '--bind', '127.0.0.1', '--port', '6379', '--save', '', '--appendonly', 'no'],
        { stdio: 'inherit' },
      ).status === 0
    );
  },
  'Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or run\n  docker compose up -d redis\nthen set REDIS_URL if it is not redis://127.0.0.1:6379.',
);

const tsxCli = path.join(root, 'node_modules/tsx/dist/cli.mjs');
const tsx = [tsxCli, '--tsconfig', 'tsconfig.json'];
const tsxWatch = [tsxCli, 'watch', '--tsconfig', 'tsconfig.json', '--clear-screen=false'];
const run = (args) =>
  execFileSync(process.execPath, [...tsx, ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] }).toString();

run(['packages/db/src/migrate-cli.ts']);
const project = JSON.parse(run(['apps/api/src/cli.ts', 'dev', 'setup', '--domain', 'example.com']));

const children = [];
const start = (name, args) => {
  const child = spawn(process.execPath, args, { env, stdio: 'inherit' });
  child.on('exit', (code) => {
    if (!shuttingDown) console.error(`${name} exited (${code})`);
  });
  children.push(child);
};
let shuttingDown = false;
const shutdown = () => {
  shuttingDown = true;
  for (const c of children) c.kill('SIGTERM');
  setTimeout(() => process.exit(0), 3000).unref();
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

const sesUrl = new URL(env.SES_ENDPOINT);
if (['127.0.0.1', 'localhost'].includes(sesUrl.hostname) && !(await answers(env.SES_ENDPOINT, 8005))) {
  start('ses emulator', [
    path.join(root, 'node_modules/aws-ses-v2-local/dist/cli.js'),
    '--host',
    '127.0.0.1',
    '--port',
    sesUrl.port || '8005',
  ]);
}
start('api', [...tsxWatch, 'apps/api/src/server.ts']);
start('worker', [...tsxWatch, 'apps/worker/src/main.ts']);
// The SMTP relay on a local plain port (no certificate needed; never like this in production).
const smtpEnv = {
  SMTP_PORT: '0',
  SMTP_TLS_PORT: '0',
  SMTP_PLAIN_PORT: process.env.SMTP_PLAIN_PORT ?? '2525',
  SMTP_ALLOW_INSECURE: 'true',
};
children.push(
  spawn(process.execPath, [...tsxWatch, 'apps/api/src/smtp-server.ts'], {
    env: { ...env, ...smtpEnv },
    stdio: 'inherit',
  }),
);

let up = false;
for (let i = 0; i < 60 && !(up = await answers(`http://127.0.0.1:${port}`, port)); i++) await sleep(500);
if (!up) {
  console.error(`The API did not start on port ${port}; see the output above.`);
  shutdown();
  await sleep(5000);
}

console.log(`
Mailroom is running.
  API          http://localhost:${port}   (docs: http://localhost:${port}/docs)
  SES inbox    ${env.SES_ENDPOINT}        (every email the worker sends lands here)
  SMTP relay   localhost:${smtpEnv.SMTP_PLAIN_PORT}  (user plunk, password: the secret key; local plain port)
  Project      ${project.id}  (verified domain: ${project.domain})
  Secret key   ${project.secretKey}
  Public key   ${project.publicKey}
  Admin token  ${env.ADMIN_TOKEN}

Send an email:
  curl -s http://localhost:${port}/v1/send \\
    -H 'Authorization: Bearer ${project.secretKey}' \\
    -H 'Content-Type: application/json' \\
    -d '{"to":"ada@example.org","from":"hello@${project.domain}","subject":"Hello {{name ?? \\"there\\"}}","body":"<p>Hi {{name}}!</p>","data":{"name":"Ada"}}'

Ctrl-C stops everything.
`);
