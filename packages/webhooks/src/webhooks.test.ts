import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  isPublicAddress,
  isWebhookEventPattern,
  publicOnlyLookup,
  sendHttp,
  signWebhook,
  webhookPatternsMatch,
  webhookUrlProblem,
  ForbiddenTargetError,
} from './webhooks';

test('isPublicAddress: only public unicast addresses pass, v4-mapped v6 included', () => {
  const table: [string, boolean][] = [
    ['8.8.8.8', true],
    ['93.184.216.34', true],
    ['2606:4700:4700::1111', true],
    ['127.0.0.1', false],
    ['10.0.0.1', false],
    ['172.16.5.4', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['::1', false],
    ['fe80::1', false],
    ['fc00::1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:8.8.8.8', true],
    ['not-an-ip', false],
  ];
  for (const [ip, expected] of table) expect({ ip, public: isPublicAddress(ip) }).toEqual({ ip, public: expected });
});

test('webhookUrlProblem refuses literal private targets unless allowed, and bad URLs always', () => {
  expect(webhookUrlProblem('https://hooks.example.com/x', false)).toBeNull();
  expect(webhookUrlProblem('http://127.0.0.1/', false)).toMatch(/private|loopback/);
  expect(webhookUrlProblem('http://api.localhost/', false)).toMatch(/loopback/);
  expect(webhookUrlProblem('http://127.0.0.1/', true)).toBeNull();
  expect(webhookUrlProblem('gopher://x/', true)).toMatch(/http/);
});

test('the connect-time lookup refuses names that resolve only to private addresses', async () => {
  const err = await new Promise<Error | null>((resolve) =>
    publicOnlyLookup('localhost', { all: true }, (e) => resolve(e)),
  );
  expect(err).toBeInstanceOf(ForbiddenTargetError);
});

test('event patterns: exact types, family wildcards and * only', () => {
  expect(['email.bounced', 'email.*', 'contact.*', '*', 'workflow.completed'].every(isWebhookEventPattern)).toBe(true);
  expect(['email.bouncd', 'billing.*', 'email', ''].some(isWebhookEventPattern)).toBe(false);
  expect(webhookPatternsMatch(['email.*'], 'email.opened')).toBe(true);
  expect(webhookPatternsMatch(['email.sent'], 'email.opened')).toBe(false);
});

test('signatures follow Standard Webhooks: base64 HMAC-SHA256 of id.timestamp.body under the decoded secret', () => {
  // Test vector of the Standard Webhooks specification's reference libraries.
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const headers = signWebhook(
    secret,
    'msg_p5jXN8AQM9LWM0D4loKWxJek',
    new Date(1614265330 * 1000),
    '{"test": 2432232314}',
  );
  expect(headers).toEqual({
    'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    'webhook-timestamp': '1614265330',
    'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  });
});

test('sendHttp reports status and body, a refused target and a timeout as values, never throws', async () => {
  const timers: NodeJS.Timeout[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/slow') return void timers.push(setTimeout(() => res.end('late'), 2000));
    res.writeHead(201).end('x'.repeat(5000));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const ok = await sendHttp(`${base}/hook`, { headers: {}, body: '{}', timeoutMs: 1000, allowPrivate: true });
    expect(ok.statusCode).toBe(201);
    expect(ok.body).toHaveLength(1024);
    const refused = await sendHttp(`${base}/hook`, { headers: {}, body: '{}', timeoutMs: 1000, allowPrivate: false });
    expect(refused.statusCode).toBeUndefined();
    expect(refused.error).toMatch(/^refused/);
    const slow = await sendHttp(`${base}/slow`, { headers: {}, body: '{}', timeoutMs: 200, allowPrivate: true });
    expect(slow.error).toMatch(/timed out after 200 ms/);
  } finally {
    timers.forEach(clearTimeout);
    server.closeAllConnections();
    server.close();
  }
});
