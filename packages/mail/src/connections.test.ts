import { loadMailConfig } from './config';
import { connectionClientConfig, connectionNamed } from './connections';

const base = {
  SES_REGION: 'us-east-1',
  SES_ENDPOINT: 'http://127.0.0.1:8005',
  SES_MAX_SEND_RATE: '20',
  SES_CONFIGURATION_SET: 'events',
};

test('without SES_CONNECTIONS there is one connection, default, from the single-connection variables', () => {
  const { sesConnections } = loadMailConfig(base);
  expect(sesConnections).toEqual([
    {
      name: 'default',
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:8005',
      credentials: undefined,
      profile: undefined,
      configurationSet: 'events',
      maxSendRate: 20,
    },
  ]);
});

test('SES_CONNECTIONS adds named connections after default', () => {
  const { sesConnections } = loadMailConfig({
    ...base,
    SES_CONNECTIONS: JSON.stringify([
      { name: 'eu', region: 'eu-west-1', accessKeyId: 'AKIA', secretAccessKey: 's', maxSendRate: 50 },
      { name: 'client_b', region: 'us-west-2', profile: 'client-b', configurationSet: 'b-events' },
    ]),
  });
  expect(sesConnections.map((c) => c.name)).toEqual(['default', 'eu', 'client_b']);
  expect(sesConnections[1]).toMatchObject({
    region: 'eu-west-1',
    credentials: { accessKeyId: 'AKIA', secretAccessKey: 's' },
    maxSendRate: 50,
    endpoint: undefined,
  });
  expect(connectionClientConfig(sesConnections[2])).toEqual({
    sesRegion: 'us-west-2',
    sesEndpoint: undefined,
    awsCredentials: undefined,
    sesProfile: 'client-b',
    sesConfigurationSet: 'b-events',
    sesConfigurationSets: { configurationSet: 'b-events' },
    sesConnectionName: 'client_b',
    sesMaxSendRate: undefined,
  });
  expect(connectionNamed(sesConnections, 'eu').name).toBe('eu');
  expect(connectionNamed(sesConnections, 'gone').name).toBe('default');
  expect(connectionNamed(sesConnections, null).name).toBe('default');
});

test.each([
  ['not json', /SES_CONNECTIONS must be a JSON array/],
  ['{}', /SES_CONNECTIONS must be a JSON array/],
  ['[1]', /SES_CONNECTIONS\[0\] must be an object/],
  ['[{"region":"eu-west-1"}]', /SES_CONNECTIONS\[0\]\.name is required/],
  ['[{"name":"default","region":"eu-west-1"}]', /SES_CONNECTIONS\[0\]\.name "default" is already used/],
  ['[{"name":"a","region":"r"},{"name":"a","region":"r"}]', /SES_CONNECTIONS\[1\]\.name "a" is already used/],
  ['[{"name":"Bad Name","region":"r"}]', /SES_CONNECTIONS\[0\]\.name must be/],
  ['[{"name":"a"}]', /SES_CONNECTIONS\[0\]\.region is required/],
  ['[{"name":"a","region":"r","endpoint":"ftp://x"}]', /SES_CONNECTIONS\[0\]\.endpoint must be an http/],
  ['[{"name":"a","region":"r","accessKeyId":"k"}]', /SES_CONNECTIONS\[0\]\.secretAccessKey must be set together/],
  ['[{"name":"a","region":"r","maxSendRate":0}]', /SES_CONNECTIONS\[0\]\.maxSendRate must be a whole number/],
  ['[{"name":"a","region":"r","secret":"x"}]', /SES_CONNECTIONS\[0\]\.secret is not a connection field/],
])('SES_CONNECTIONS %s is refused, naming the entry and field', (raw, message) => {
  expect(() => loadMailConfig({ ...base, SES_CONNECTIONS: raw })).toThrow(message);
});

test('the configuration sets of each stream and tracking: SES_CONFIGURATION_SET_* for default, the fields of SES_CONNECTIONS for the others', () => {
  const { sesConnections } = loadMailConfig({
    ...base,
    SES_CONFIGURATION_SET_NO_TRACKING: 'events-plain',
    SES_CONFIGURATION_SET_MARKETING: 'news',
    SES_CONFIGURATION_SET_MARKETING_NO_TRACKING: 'news-plain',
    SES_CONNECTIONS: JSON.stringify([
      {
        name: 'eu',
        region: 'eu-west-1',
        configurationSet: 'eu-events',
        configurationSetNoTracking: 'eu-plain',
        configurationSetMarketing: 'eu-news',
      },
    ]),
  });
  expect(sesConnections[0]).toMatchObject({
    configurationSet: 'events',
    configurationSetNoTracking: 'events-plain',
    configurationSetMarketing: 'news',
    configurationSetMarketingNoTracking: 'news-plain',
  });
  expect(sesConnections[1]).toMatchObject({
    configurationSet: 'eu-events',
    configurationSetNoTracking: 'eu-plain',
    configurationSetMarketing: 'eu-news',
    configurationSetMarketingNoTracking: undefined,
  });
  expect(() =>
    loadMailConfig({
      ...base,
      SES_CONNECTIONS: JSON.stringify([{ name: 'eu', region: 'eu-west-1', configurationSetMarketing: 7 }]),
    }),
  ).toThrow(/SES_CONNECTIONS\[0\]\.configurationSetMarketing/);
});
