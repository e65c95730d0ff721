/**
 * The SES v2 identity provider against SES's REST-JSON API shapes (the responses below follow the SES v2 API
 * reference's response syntax for CreateEmailIdentity, GetEmailIdentity, PutEmailIdentityMailFromAttributes and
 * DeleteEmailIdentity, and SES's error form: `x-amzn-errortype` header and `{message}` body), served by a loopback
 * HTTP server that also records the requests.
 */
import { domainRecords, identityFailure, SesIdentityProvider } from './identities';
import { useSesAnswers } from '../../../test/support/ses-answers';

const TOKENS = [
  'ihjtj4nsgb5kdxjfc4kwqwufpmg6ldry',
  'pu3zv2cbzj3jhnqyoubp4mwvd5fgu3hu',
  '2wdjdlmkx5rs4yvb2fptx4h4c4zdhtpd',
];

const identity = (over: { dkim?: string; mailFrom?: string; verified?: boolean }) => ({
  ConfigurationSetName: null,
  DkimAttributes: {
    SigningEnabled: true,
    Status: over.dkim ?? 'PENDING',
    Tokens: TOKENS,
    SigningAttributesOrigin: 'AWS_SES',
    NextSigningKeyLength: 'RSA_2048_BIT',
    CurrentSigningKeyLength: 'RSA_2048_BIT',
  },
  FeedbackForwardingStatus: true,
  IdentityType: 'DOMAIN',
  MailFromAttributes: {
    BehaviorOnMxFailure: 'USE_DEFAULT_VALUE',
    MailFromDomain: 'mail.example.com',
    MailFromDomainStatus: over.mailFrom ?? 'PENDING',
  },
  Policies: {},
  Tags: [],
  VerifiedForSendingStatus: over.verified ?? false,
  VerificationStatus: over.verified ? 'SUCCESS' : 'PENDING',
});

const ses = useSesAnswers();
let provider: SesIdentityProvider;
beforeAll(() => {
  provider = new SesIdentityProvider({
    sesRegion: 'us-east-1',
    sesEndpoint: ses.endpoint,
    awsCredentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  });
});

test('create: CreateEmailIdentity (Easy DKIM tokens), then the custom MAIL FROM domain', async () => {
  ses.byRequest['POST /v2/email/identities'] = [
    {
      status: 200,
      body: { DkimAttributes: identity({}).DkimAttributes, IdentityType: 'DOMAIN', VerifiedForSendingStatus: false },
    },
  ];
  ses.byRequest['PUT /v2/email/identities/example.com/mail-from'] = [{ status: 200, body: {} }];
  const { dkimTokens } = await provider.create('example.com', 'mail.example.com');
  expect(dkimTokens).toEqual(TOKENS);
  expect(JSON.parse(ses.seen[0].body)).toEqual({ EmailIdentity: 'example.com' });
  expect(JSON.parse(ses.seen[1].body)).toEqual({
    MailFromDomain: 'mail.example.com',
    BehaviorOnMxFailure: 'USE_DEFAULT_VALUE',
  });
});

test('create of an identity SES already has reads its tokens (AlreadyExistsException)', async () => {
  ses.byRequest['POST /v2/email/identities'] = [
    { status: 400, body: { message: 'Email identity example.com already exist.' }, error: 'AlreadyExistsException' },
  ];
  ses.byRequest['GET /v2/email/identities/example.com'] = [{ status: 200, body: identity({}) }];
  ses.byRequest['PUT /v2/email/identities/example.com/mail-from'] = [{ status: 200, body: {} }];
  expect((await provider.create('example.com', 'mail.example.com')).dkimTokens).toEqual(TOKENS);
});

test('check maps SES states: pending, verified (records found), failed', async () => {
  const records = domainRecords('example.com', 'mail.example.com', TOKENS, 'us-east-1');
  ses.byRequest['GET /v2/email/identities/example.com'] = [
    { status: 200, body: identity({}) },
    { status: 200, body: identity({ dkim: 'SUCCESS', mailFrom: 'SUCCESS', verified: true }) },
    { status: 200, body: identity({ dkim: 'FAILED', mailFrom: 'FAILED' }) },
  ];
  expect((await provider.check('example.com', records)).status).toBe('pending');
  const ok = await provider.check('example.com', records);
  expect(ok.status).toBe('verified');
  expect(ok.records.filter((r) => r.required).every((r) => r.status === 'found')).toBe(true);
  expect(ok.records.find((r) => r.purpose === 'dmarc')!.status).toBe('pending');
  const failed = await provider.check('example.com', records);
  expect(failed).toMatchObject({ status: 'failed', reason: expect.stringContaining('DKIM') });
  expect(failed.records.find((r) => r.purpose === 'dkim')!.status).toBe('failed');
});

test('delete: DeleteEmailIdentity; an identity SES does not have is fine; other errors are thrown', async () => {
  ses.byRequest['DELETE /v2/email/identities/example.com'] = [
    { status: 200, body: {} },
    { status: 404, body: { message: 'Email identity example.com does not exist.' }, error: 'NotFoundException' },
    { status: 400, body: { message: 'Rate exceeded' }, error: 'BadRequestException' },
  ];
  await provider.delete('example.com');
  await provider.delete('example.com');
  await expect(provider.delete('example.com')).rejects.toMatchObject({ name: 'BadRequestException' });
});

test('failures are told apart: a request SES rejects (the caller can fix it) from SES not answering', async () => {
  ses.byRequest['POST /v2/email/identities'] = [
    { status: 400, body: { message: 'Invalid domain name bad_domain.' }, error: 'BadRequestException' },
    { status: 429, body: { message: 'Rate exceeded' }, error: 'TooManyRequestsException' },
    { status: 500, body: { message: 'internal' }, error: 'InternalFailure' },
  ];
  const failure = (p: Promise<unknown>) => p.then(() => undefined, identityFailure);
  expect(await failure(provider.create('bad_domain', 'mail.bad_domain'))).toEqual({
    kind: 'rejected',
    message: 'BadRequestException: Invalid domain name bad_domain.',
  });
  expect((await failure(provider.create('example.com', 'mail.example.com')))!.kind).toBe('unavailable');
  expect((await failure(provider.create('example.com', 'mail.example.com')))!.kind).toBe('unavailable');
  expect(identityFailure(Object.assign(new Error('connect ECONNREFUSED'), { name: 'Error' })).kind).toBe('unavailable');
});
