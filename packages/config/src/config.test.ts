import { ConfigError, loadConfig } from './config';

describe('config', () => {
  test('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      sesMaxSendRate: undefined,
      rateLimitPerMinute: 1000,
      queuePrefix: '{mailroom}',
      publicUrl: 'http://localhost:8080',
      adminToken: undefined,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });
  test.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ SES_MAX_SEND_RATE: '0' }, 'SES_MAX_SEND_RATE'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'not a url' }, 'REDIS_URL'],
    [{ AWS_ACCESS_KEY_ID: 'AKIA' }, 'AWS_SECRET_ACCESS_KEY'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN'],
    [{ NODE_ENV: 'staging' }, 'NODE_ENV'],
    [{ LOG_PRETTY: 'maybe' }, 'LOG_PRETTY'],
    [{ QUEUE_PREFIX: 'has space' }, 'QUEUE_PREFIX'],
    [{ SES_ACCOUNT_PROVIDER: 'aws' }, 'SES_ACCOUNT_PROVIDER'],
    [{ SES_QUOTA_RESERVE: '0.6' }, 'SES_QUOTA_RESERVE'],
    [{ SES_QUOTA_RESERVE: '5%' }, 'SES_QUOTA_RESERVE'],
    [{ SES_LOCAL_MAX_24H_SEND: '0' }, 'SES_LOCAL_MAX_24H_SEND'],
    // Production refuses the placeholder docker-compose.yml ships, the dev script's token, and short tokens.
    [{ NODE_ENV: 'production', ADMIN_TOKEN: 'change-me-to-a-long-random-token' }, 'ADMIN_TOKEN'],
    [{ NODE_ENV: 'production', ADMIN_TOKEN: 'dev-admin-token-change-me' }, 'ADMIN_TOKEN'],
    [{ NODE_ENV: 'production', ADMIN_TOKEN: 'k3J9xQ2mP7vL5nR8tW4yZ6' }, 'ADMIN_TOKEN'],
    [{ NODE_ENV: 'production', ADMIN_TOKEN: 'x'.repeat(64) }, 'ADMIN_TOKEN'],
    [{ DATABASE_REPLICA_URLS: 'postgres://r1/db,mysql://r2/db' }, 'DATABASE_REPLICA_URLS'],
    [{ DATABASE_REPLICA_URLS: 'not a url' }, 'DATABASE_REPLICA_URLS'],
    [{ DATABASE_REPLICA_MAX_LAG_MS: '5s' }, 'DATABASE_REPLICA_MAX_LAG_MS'],
    [{ DATABASE_REPLICA_CHECK_INTERVAL_MS: '10' }, 'DATABASE_REPLICA_CHECK_INTERVAL_MS'],
  ])('%j fails naming %s', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (err) {
      expect((err as ConfigError).variable).toBe(variable);
      expect((err as Error).message).toContain(variable);
    }
  });
});

describe('ADMIN_TOKEN in production', () => {
  test('a long random token is accepted; outside production the development token is too; unset leaves the admin API off', () => {
    const strong = 'a3f1c9e07b2d4c68e5f1a0b9c7d3e2f14b6a8c0d9e7f5a3b';
    expect(loadConfig({ NODE_ENV: 'production', ADMIN_TOKEN: strong }).adminToken).toBe(strong);
    expect(loadConfig({ NODE_ENV: 'development', ADMIN_TOKEN: 'dev-admin-token-change-me' }).adminToken).toBe(
      'dev-admin-token-change-me',
    );
    expect(loadConfig({ NODE_ENV: 'production' }).adminToken).toBeUndefined();
  });

  test('the message names the variable and says what to do', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', ADMIN_TOKEN: 'change-me-to-a-long-random-token' })).toThrow(
      'Invalid configuration: ADMIN_TOKEN is a placeholder; set a long random value (openssl rand -hex 32)',
    );
    expect(() => loadConfig({ NODE_ENV: 'production', ADMIN_TOKEN: 'k3J9xQ2mP7vL5nR8tW4yZ6' })).toThrow(
      /ADMIN_TOKEN must be at least 32 characters in production \(got 22\)/,
    );
  });
});

describe('read replicas', () => {
  test('none by default; a comma-separated list with a lag limit and a check interval', () => {
    expect(loadConfig({})).toMatchObject({
      databaseReplicaUrls: [],
      databaseReplicaMaxLagMs: 5_000,
      databaseReplicaCheckIntervalMs: 1_000,
    });
    const c = loadConfig({
      DATABASE_REPLICA_URLS: ' postgres://r1:5433/mailroom , postgresql://u:p@r2/mailroom,',
      DATABASE_REPLICA_MAX_LAG_MS: '250',
      DATABASE_REPLICA_CHECK_INTERVAL_MS: '200',
    });
    expect(c).toMatchObject({
      databaseReplicaUrls: ['postgres://r1:5433/mailroom', 'postgresql://u:p@r2/mailroom'],
      databaseReplicaMaxLagMs: 250,
      databaseReplicaCheckIntervalMs: 200,
    });
  });
});

describe('send rate and SES account', () => {
  test('SES_MAX_SEND_RATE is an optional cap; the local provider takes it as its rate unless told otherwise', () => {
    expect(loadConfig({})).toMatchObject({
      sesMaxSendRate: undefined,
      sesAccountProvider: 'ses',
      sesAccountRefreshMs: 300_000,
      sesQuotaCheckMs: 10_000,
      sesQuotaReserve: 0.05,
      sesLocalMaxSendRate: 14,
      sesLocalMax24HourSend: 50_000,
      campaignLaneSeconds: 3,
      sendFairSharePerMinute: 100,
    });
    expect(loadConfig({ SES_ENDPOINT: 'http://127.0.0.1:8005', SES_MAX_SEND_RATE: '50' })).toMatchObject({
      sesAccountProvider: 'local',
      sesMaxSendRate: 50,
      sesLocalMaxSendRate: 50,
    });
    expect(
      loadConfig({ SES_ENDPOINT: 'http://127.0.0.1:8005', SES_ACCOUNT_PROVIDER: 'ses', SES_LOCAL_MAX_SEND_RATE: '3' }),
    ).toMatchObject({ sesAccountProvider: 'ses', sesLocalMaxSendRate: 3 });
  });
});

describe('TRUST_PROXY', () => {
  test.each([
    [undefined, false],
    ['false', false],
    ['FALSE', false],
    ['true', true],
    ['0', 0],
    ['2', 2],
    ['loopback', ['loopback']],
    [
      'loopback, 10.0.0.0/8 ,fd00::/8,192.168.1.1,uniquelocal,LinkLocal',
      ['loopback', '10.0.0.0/8', 'fd00::/8', '192.168.1.1', 'uniquelocal', 'linklocal'],
    ],
    ['10.0.0.0/255.0.0.0', ['10.0.0.0/255.0.0.0']],
    ['2001:db8::1', ['2001:db8::1']],
  ])('%s → %j', (raw, expected) => {
    const c = loadConfig(raw === undefined ? {} : { TRUST_PROXY: raw });
    expect(c.trustProxy).toEqual(expected);
    if (Array.isArray(c.trustProxy)) expect(Object.isFrozen(c.trustProxy)).toBe(true);
  });

  test.each([
    'yes',
    '10.0.0.0/33',
    'fd00::/129',
    'proxy.example.com',
    '10.0.0.1/8/8',
    '101',
    '1.2.3',
    '10.0.0.0/255.0.0',
  ])('"%s" fails naming TRUST_PROXY', (raw) => {
    expect(() => loadConfig({ TRUST_PROXY: raw })).toThrow(/TRUST_PROXY/);
  });

  test('BLOCKED_LOOKUP_INTERVAL_S: default 2 s, 1..60', () => {
    expect(loadConfig({}).blockedLookupIntervalSeconds).toBe(2);
    expect(loadConfig({ BLOCKED_LOOKUP_INTERVAL_S: '5' }).blockedLookupIntervalSeconds).toBe(5);
    expect(() => loadConfig({ BLOCKED_LOOKUP_INTERVAL_S: '0' })).toThrow(/BLOCKED_LOOKUP_INTERVAL_S/);
  });
});
