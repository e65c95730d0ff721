/**
 * The SES v2 configuration-set provider of custom tracking domains against SES's REST-JSON API shapes (the answers
 * below follow the SES v2 API reference's response syntax for GetConfigurationSet, CreateConfigurationSet,
 * PutConfigurationSetTrackingOptions, GetConfigurationSetEventDestinations, CreateConfigurationSetEventDestination,
 * UpdateConfigurationSetEventDestination and DeleteConfigurationSet, and SES's error form: `x-amzn-errortype` header
 * and `{message}` body), served by a loopback HTTP server that also records the requests; and the pure helpers.
 */
import { identityFailure } from './identities';
import { configurationSetFor } from './connections';
import {
  parseTrackingDomain,
  SesTrackingSetProvider,
  trackingConfigurationSetName,
  trackingDomainRecord,
} from './tracking';
import { useSesAnswers } from '../../../test/support/ses-answers';

const ses = useSesAnswers();
let provider: SesTrackingSetProvider;

/** `GetConfigurationSet` of the tracked base set: a dedicated pool, reputation metrics, TLS required. */
const BASE = {
  ConfigurationSetName: 'tx-tracked',
  DeliveryOptions: { SendingPoolName: 'transactional-pool', TlsPolicy: 'REQUIRE' },
  ReputationOptions: { ReputationMetricsEnabled: true, LastFreshStart: 1700000000 },
  SendingOptions: { SendingEnabled: true },
  SuppressionOptions: { SuppressedReasons: ['BOUNCE', 'COMPLAINT'] },
  Tags: [],
  TrackingOptions: null,
};

/** `GetConfigurationSetEventDestinations` of the base set: the SNS destination feeding `POST /webhooks/ses`. */
const DESTINATIONS = {
  EventDestinations: [
    {
      Name: 'to-mailroom',
      Enabled: true,
      MatchingEventTypes: [
        'SEND',
        'DELIVERY',
        'BOUNCE',
        'COMPLAINT',
        'REJECT',
        'DELIVERY_DELAY',
        'RENDERING_FAILURE',
        'OPEN',
        'CLICK',
      ],
      SnsDestination: { TopicArn: 'arn:aws:sns:us-east-1:123456789012:ses-events' },
    },
  ],
};

beforeAll(() => {
  provider = new SesTrackingSetProvider({
    sesRegion: 'us-east-1',
    sesEndpoint: ses.endpoint,
    awsCredentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  });
});

const NAME = trackingConfigurationSetName('tx-tracked', 'track.example.com');

test('ensure: copies the base set (pool, reputation, sending, suppression) with the custom redirect domain, then its event destinations', async () => {
  ses.byRequest['GET /v2/email/configuration-sets/tx-tracked'] = [{ status: 200, body: BASE }];
  ses.byRequest['POST /v2/email/configuration-sets'] = [{ status: 200, body: {} }];
  ses.byRequest['GET /v2/email/configuration-sets/tx-tracked/event-destinations'] = [
    { status: 200, body: DESTINATIONS },
  ];
  ses.byRequest[`POST /v2/email/configuration-sets/${NAME}/event-destinations`] = [{ status: 200, body: {} }];
  await provider.ensure(NAME, 'tx-tracked', 'track.example.com');
  expect(ses.seen.map((s) => `${s.method} ${s.path}`)).toEqual([
    'GET /v2/email/configuration-sets/tx-tracked',
    'POST /v2/email/configuration-sets',
    'GET /v2/email/configuration-sets/tx-tracked/event-destinations',
    `POST /v2/email/configuration-sets/${NAME}/event-destinations`,
  ]);
  expect(JSON.parse(ses.seen[1].body)).toEqual({
    ConfigurationSetName: NAME,
    TrackingOptions: { CustomRedirectDomain: 'track.example.com', HttpsPolicy: 'OPTIONAL' },
    DeliveryOptions: { SendingPoolName: 'transactional-pool', TlsPolicy: 'REQUIRE' },
    ReputationOptions: { ReputationMetricsEnabled: true },
    SendingOptions: { SendingEnabled: true },
    SuppressionOptions: { SuppressedReasons: ['BOUNCE', 'COMPLAINT'] },
  });
  expect(JSON.parse(ses.seen[3].body)).toEqual({
    EventDestinationName: 'to-mailroom',
    EventDestination: {
      Enabled: true,
      MatchingEventTypes: DESTINATIONS.EventDestinations[0].MatchingEventTypes,
      SnsDestination: DESTINATIONS.EventDestinations[0].SnsDestination,
    },
  });
});

test('ensure of a set SES has already (AlreadyExistsException): its tracking options and destinations are brought up to date', async () => {
  ses.byRequest['GET /v2/email/configuration-sets/tx-tracked'] = [{ status: 200, body: BASE }];
  ses.byRequest['POST /v2/email/configuration-sets'] = [
    { status: 400, body: { message: `Configuration set <${NAME}> already exists.` }, error: 'AlreadyExistsException' },
  ];
  ses.byRequest[`PUT /v2/email/configuration-sets/${NAME}/tracking-options`] = [{ status: 200, body: {} }];
  ses.byRequest['GET /v2/email/configuration-sets/tx-tracked/event-destinations'] = [
    { status: 200, body: DESTINATIONS },
  ];
  ses.byRequest[`POST /v2/email/configuration-sets/${NAME}/event-destinations`] = [
    {
      status: 400,
      body: { message: 'Event destination to-mailroom already exists.' },
      error: 'AlreadyExistsException',
    },
  ];
  ses.byRequest[`PUT /v2/email/configuration-sets/${NAME}/event-destinations/to-mailroom`] = [
    { status: 200, body: {} },
  ];
  await provider.ensure(NAME, 'tx-tracked', 'track.example.com');
  const put = ses.seen.find((s) => s.path.endsWith('/tracking-options'))!;
  expect(JSON.parse(put.body)).toEqual({ CustomRedirectDomain: 'track.example.com', HttpsPolicy: 'OPTIONAL' });
  const update = ses.seen.find((s) => s.method === 'PUT' && s.path.endsWith('/event-destinations/to-mailroom'))!;
  expect(JSON.parse(update.body).EventDestination.SnsDestination).toEqual(
    DESTINATIONS.EventDestinations[0].SnsDestination,
  );
});

test('a base set SES does not know is a NotFoundException, rejected (a 400: the operator fixes the configuration); throttling is unavailable', async () => {
  ses.byRequest['GET /v2/email/configuration-sets/tx-tracked'] = [
    { status: 404, body: { message: 'Configuration set <tx-tracked> does not exist.' }, error: 'NotFoundException' },
    { status: 429, body: { message: 'Rate exceeded' }, error: 'TooManyRequestsException' },
  ];
  const missing = await provider.ensure(NAME, 'tx-tracked', 'track.example.com').catch((e: unknown) => e);
  expect((missing as Error).name).toBe('NotFoundException');
  const throttled = await provider.ensure(NAME, 'tx-tracked', 'track.example.com').catch((e: unknown) => e);
  expect(identityFailure(throttled).kind).toBe('unavailable');
  expect(ses.seen.filter((s) => s.method === 'POST')).toHaveLength(0);
});

test('a custom redirect domain SES refuses (BadRequestException: not under a verified identity) is rejected', async () => {
  ses.byRequest['GET /v2/email/configuration-sets/tx-tracked'] = [{ status: 200, body: BASE }];
  ses.byRequest['POST /v2/email/configuration-sets'] = [
    { status: 400, body: { message: 'Domain track.example.com is not verified.' }, error: 'BadRequestException' },
  ];
  const err = await provider.ensure(NAME, 'tx-tracked', 'track.example.com').catch((e: unknown) => e);
  expect(identityFailure(err)).toEqual({ kind: 'rejected', message: expect.stringContaining('BadRequestException') });
});

test('remove: DeleteConfigurationSet; a missing set is fine', async () => {
  ses.byRequest[`DELETE /v2/email/configuration-sets/${NAME}`] = [
    { status: 200, body: {} },
    { status: 404, body: { message: 'not found' }, error: 'NotFoundException' },
  ];
  await provider.remove(NAME);
  await provider.remove(NAME);
  expect(ses.seen).toHaveLength(2);
});

test('set names: deterministic, within 64 characters, distinct per tracking domain', () => {
  expect(NAME).toMatch(/^tx-tracked-trk-[0-9a-f]{12}$/);
  expect(trackingConfigurationSetName('tx-tracked', 'TRACK.example.com')).toBe(NAME);
  expect(trackingConfigurationSetName('tx-tracked', 'links.example.com')).not.toBe(NAME);
  expect(trackingConfigurationSetName('x'.repeat(80), 'track.example.com')).toHaveLength(64);
});

test('tracking domains: a subdomain of the sending domain; its record a CNAME to the regional endpoint', () => {
  expect(parseTrackingDomain('example.com', ' Track.Example.com. ')).toEqual({
    ok: true,
    trackingDomain: 'track.example.com',
  });
  expect(parseTrackingDomain('example.com', 'example.com')).toMatchObject({ ok: false });
  expect(parseTrackingDomain('example.com', 'track.other.com')).toMatchObject({
    ok: false,
    message: expect.stringContaining('subdomain of example.com'),
  });
  expect(parseTrackingDomain('example.com', 'bad_label.example.com')).toMatchObject({ ok: false });
  expect(parseTrackingDomain('example.com', 'https://track.example.com')).toMatchObject({ ok: false });
  expect(trackingDomainRecord('track.example.com', 'eu-west-1')).toEqual({
    purpose: 'tracking',
    type: 'CNAME',
    name: 'track.example.com',
    value: 'r.eu-west-1.awstrack.me',
    required: true,
    status: 'pending',
  });
});

test('the stream × tracking matrix of configuration sets, with its fallbacks', () => {
  const all = {
    configurationSet: 'tx',
    configurationSetNoTracking: 'tx-plain',
    configurationSetMarketing: 'mk',
    configurationSetMarketingNoTracking: 'mk-plain',
  };
  expect([
    configurationSetFor(all, 'transactional', true),
    configurationSetFor(all, 'transactional', false),
    configurationSetFor(all, 'marketing', true),
    configurationSetFor(all, 'marketing', false),
  ]).toEqual(['tx', 'tx-plain', 'mk', 'mk-plain']);
  // Only the tracked set: every cell falls back to it.
  const one = { configurationSet: 'tx' };
  expect(configurationSetFor(one, 'marketing', false)).toBe('tx');
  // Without a marketing untracked set, untracked marketing mail stays untracked (the transactional untracked set).
  expect(
    configurationSetFor(
      { configurationSet: 'tx', configurationSetNoTracking: 'tx-plain', configurationSetMarketing: 'mk' },
      'marketing',
      false,
    ),
  ).toBe('tx-plain');
  expect(configurationSetFor({ configurationSet: undefined }, 'transactional', true)).toBeUndefined();
});
