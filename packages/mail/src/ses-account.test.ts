/**
 * The SES account provider against SES v2 `GetAccount` answers in SES's REST-JSON form (the response syntax of the
 * SES v2 API reference: `SendQuota` with doubles, `ProductionAccessEnabled`, `SendingEnabled`,
 * `EnforcementStatus`; errors as the `x-amzn-errortype` header and a message body), served by a loopback HTTP
 * server that records the requests; the local provider; and the rate and quota decisions.
 */
import { effectiveSendRate, LocalAccountProvider, quotaState, SesAccountProvider } from './ses-account';
import { useSesAnswers } from '../../../test/support/ses-answers';

/** A production account's `GetAccount` answer (as SES sends it: numbers are doubles). */
const PRODUCTION = {
  DedicatedIpAutoWarmupEnabled: true,
  Details: {
    MailType: 'TRANSACTIONAL',
    WebsiteURL: 'https://example.com',
    ContactLanguage: 'EN',
    UseCaseDescription: 'Receipts',
    AdditionalContactEmailAddresses: [],
    ReviewDetails: { Status: 'GRANTED', CaseId: '12345678901' },
  },
  EnforcementStatus: 'HEALTHY',
  ProductionAccessEnabled: true,
  SendQuota: { Max24HourSend: 50000.0, MaxSendRate: 14.0, SentLast24Hours: 1234.0 },
  SendingEnabled: true,
  SuppressionAttributes: { SuppressedReasons: ['BOUNCE', 'COMPLAINT'] },
};

/** An account still in the sandbox: 200 emails a day at 1/s. */
const SANDBOX = {
  DedicatedIpAutoWarmupEnabled: true,
  EnforcementStatus: 'HEALTHY',
  ProductionAccessEnabled: false,
  SendQuota: { Max24HourSend: 200.0, MaxSendRate: 1.0, SentLast24Hours: 0.0 },
  SendingEnabled: true,
  SuppressionAttributes: { SuppressedReasons: [] },
};

const ses = useSesAnswers();
let provider: SesAccountProvider;
beforeAll(() => {
  provider = new SesAccountProvider({
    sesRegion: 'us-east-1',
    sesEndpoint: ses.endpoint,
    awsCredentials: { accessKeyId: 'a', secretAccessKey: 'b' },
    sesTimeoutMs: 2_000,
  });
});

describe('SesAccountProvider (GetAccount)', () => {
  test('a production account: rate, quota, sent, status', async () => {
    ses.next.push({ status: 200, body: PRODUCTION });
    const before = Date.now();
    const a = await provider.getAccount();
    expect(ses.seen).toEqual([{ method: 'GET', path: '/v2/email/account', body: '' }]);
    expect(a).toMatchObject({
      maxSendRate: 14,
      max24HourSend: 50_000,
      sentLast24Hours: 1234,
      sendingEnabled: true,
      productionAccess: true,
      enforcementStatus: 'HEALTHY',
    });
    expect(a.readAt.getTime()).toBeGreaterThanOrEqual(before);
  });

  test('an account in the sandbox: 1/s and 200 a day', async () => {
    ses.next.push({ status: 200, body: SANDBOX });
    expect(await provider.getAccount()).toMatchObject({
      maxSendRate: 1,
      max24HourSend: 200,
      sentLast24Hours: 0,
      productionAccess: false,
    });
  });

  test('an unlimited quota (-1) reads as Infinity; a paused account under review says so', async () => {
    ses.next.push({
      status: 200,
      body: {
        ...PRODUCTION,
        EnforcementStatus: 'PROBATION',
        SendingEnabled: false,
        SendQuota: { Max24HourSend: -1.0, MaxSendRate: 500.0, SentLast24Hours: 2_000_000.0 },
      },
    });
    const a = await provider.getAccount();
    expect(a).toMatchObject({
      maxSendRate: 500,
      max24HourSend: Infinity,
      sendingEnabled: false,
      enforcementStatus: 'PROBATION',
    });
    expect(quotaState(a, 0.05)).toMatchObject({ spent: false, remaining: Infinity });
  });

  test('errors are thrown as SES names them: credentials without ses:GetAccount, throttling', async () => {
    ses.next.push({
      status: 403,
      body: { Message: 'User: arn:aws:iam::123456789012:user/mailroom is not authorized to perform: ses:GetAccount' },
      error: 'AccessDeniedException',
    });
    await expect(provider.getAccount()).rejects.toMatchObject({
      name: 'AccessDeniedException',
      $metadata: { httpStatusCode: 403 },
    });
    // Throttled once, then answered: the provider's one SDK retry rides it out.
    ses.next.push(
      { status: 429, body: { message: 'Rate exceeded' }, error: 'TooManyRequestsException' },
      { status: 200, body: SANDBOX },
    );
    expect((await provider.getAccount()).maxSendRate).toBe(1);
  });

  test('an answer without SendQuota is an error, not zeros', async () => {
    ses.next.push({ status: 200, body: { SendingEnabled: true } });
    await expect(provider.getAccount()).rejects.toThrow('without SendQuota');
  });
});

describe('LocalAccountProvider', () => {
  test('the configured figures and the counted sends', async () => {
    let sent = 41;
    const local = new LocalAccountProvider({ maxSendRate: 20, max24HourSend: 60 }, () => Promise.resolve(sent));
    expect(await local.getAccount()).toMatchObject({
      maxSendRate: 20,
      max24HourSend: 60,
      sentLast24Hours: 41,
      sendingEnabled: true,
    });
    sent = 58;
    expect((await local.getAccount()).sentLast24Hours).toBe(58);
  });

  test('a count that fails fails the reading', async () => {
    const local = new LocalAccountProvider({ maxSendRate: 20, max24HourSend: 60 }, () =>
      Promise.reject(new Error('connection refused')),
    );
    await expect(local.getAccount()).rejects.toThrow('connection refused');
  });
});

describe('effectiveSendRate', () => {
  test('the account rate, capped by SES_MAX_SEND_RATE, whole and at least 1', () => {
    expect(effectiveSendRate(14, undefined)).toBe(14);
    expect(effectiveSendRate(200, 50)).toBe(50);
    expect(effectiveSendRate(14, 50)).toBe(14);
    expect(effectiveSendRate(13.7, undefined)).toBe(13);
    expect(effectiveSendRate(0.5, undefined)).toBe(1);
  });
  test('unknown account: the cap, else 14', () => {
    expect(effectiveSendRate(undefined, 30)).toBe(30);
    expect(effectiveSendRate(undefined, undefined)).toBe(14);
    expect(effectiveSendRate(NaN, undefined)).toBe(14);
  });
});

describe('quotaState', () => {
  test('campaigns pause at the quota less the reserve', () => {
    expect(quotaState({ max24HourSend: 60, sentLast24Hours: 56 }, 0.05)).toEqual({
      pauseAt: 57,
      resumeBelow: 54,
      spent: false,
      free: false,
      remaining: 1,
    });
    expect(quotaState({ max24HourSend: 60, sentLast24Hours: 57 }, 0.05)).toMatchObject({
      spent: true,
      free: false,
      remaining: 0,
    });
    expect(quotaState({ max24HourSend: 50_000, sentLast24Hours: 47_499 }, 0.05)).toMatchObject({
      pauseAt: 47_500,
      spent: false,
    });
  });
  test('they resume only a further reserve below (hysteresis); a raised quota frees at once', () => {
    expect(quotaState({ max24HourSend: 60, sentLast24Hours: 55 }, 0.05)).toMatchObject({ spent: false, free: false });
    expect(quotaState({ max24HourSend: 60, sentLast24Hours: 53 }, 0.05)).toMatchObject({ spent: false, free: true });
    expect(quotaState({ max24HourSend: 1000, sentLast24Hours: 60 }, 0.05)).toMatchObject({
      pauseAt: 950,
      resumeBelow: 900,
      free: true,
    });
  });
  test('no reserve: pause at the quota itself', () => {
    expect(quotaState({ max24HourSend: 200, sentLast24Hours: 199 }, 0)).toMatchObject({
      pauseAt: 200,
      resumeBelow: 200,
      spent: false,
      free: true,
    });
    expect(quotaState({ max24HourSend: 200, sentLast24Hours: 200 }, 0)).toMatchObject({ spent: true });
  });
});
