import { ConfigError, loadConfig } from './config';

describe('config', () => {
  test('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ port: 8080, sesMaxSendRate: 14, rateLimitPerMinute: 1000, queuePrefix: '{mailroom}', publicUrl: 'http://localhost:8080', adminToken: undefined });
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
