import { isTrustedSnsUrl, parseSnsMessage, SnsRejection } from './sns';

const DEFAULT = ['sns.*.amazonaws.com', 'sns.*.amazonaws.com.cn'];

describe('isTrustedSnsUrl matches host and port (SNS_CERT_HOSTS)', () => {
  test('a pattern without a port matches the default port only', () => {
    expect(isTrustedSnsUrl('https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem', DEFAULT)).toBe(true);
    // :443 written out is the same URL (the default port is dropped from URL.host).
    expect(isTrustedSnsUrl('https://sns.us-east-1.amazonaws.com:443/SimpleNotificationService-x.pem', DEFAULT)).toBe(
      true,
    );
    expect(isTrustedSnsUrl('https://sns.us-east-1.amazonaws.com:8443/SimpleNotificationService-x.pem', DEFAULT)).toBe(
      false,
    );
  });

  test('a pattern with a port matches that port only; * never matches a port', () => {
    expect(isTrustedSnsUrl('https://certs.example.com:8443/c.pem', ['certs.example.com:8443'])).toBe(true);
    expect(isTrustedSnsUrl('https://certs.example.com/c.pem', ['certs.example.com:8443'])).toBe(false);
    expect(isTrustedSnsUrl('https://certs.example.com:9443/c.pem', ['certs.example.com:8443'])).toBe(false);
    expect(isTrustedSnsUrl('https://certs.example.com:8443/c.pem', ['certs.example.*'])).toBe(false);
    expect(isTrustedSnsUrl('https://CERTS.Example.com:8443/c.pem', ['certs.example.com:8443'])).toBe(true);
  });

  test('plain http only on a loopback host listed literally, with its port', () => {
    expect(isTrustedSnsUrl('http://127.0.0.1:4567/c.pem', ['127.0.0.1:4567'])).toBe(true);
    expect(isTrustedSnsUrl('http://127.0.0.1:4568/c.pem', ['127.0.0.1:4567'])).toBe(false);
    expect(isTrustedSnsUrl('http://sns.us-east-1.amazonaws.com/c.pem', DEFAULT)).toBe(false);
  });
});

describe('parseSnsMessage: malformed is 400, unsigned is 403', () => {
  const signed = {
    Type: 'Notification',
    MessageId: 'm-1',
    TopicArn: 'arn:aws:sns:us-east-1:123456789012:t',
    Message: '{}',
    Timestamp: new Date().toISOString(),
    SignatureVersion: '2',
    Signature: 'c2ln',
    SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem',
  };
  const statusOf = (body: unknown): number | 'parsed' => {
    try {
      parseSnsMessage(typeof body === 'string' ? body : JSON.stringify(body));
      return 'parsed';
    } catch (err) {
      if (err instanceof SnsRejection) return err.status;
      throw err;
    }
  };
  const without = (...keys: string[]) => Object.fromEntries(Object.entries(signed).filter(([k]) => !keys.includes(k)));

  test('a well-formed, signed message parses (its signature is checked later)', () => {
    expect(statusOf(signed)).toBe('parsed');
  });

  test.each([
    ['no Signature', without('Signature')],
    ['no SignatureVersion', without('SignatureVersion')],
    ['no SigningCertURL', without('SigningCertURL')],
    ['none of the three', without('Signature', 'SignatureVersion', 'SigningCertURL')],
    ['SignatureVersion 3', { ...signed, SignatureVersion: '3' }],
    ['empty Signature', { ...signed, Signature: '' }],
    ['numeric SignatureVersion', { ...signed, SignatureVersion: 2 }],
  ])('%s: 403', (_what, body) => {
    expect(statusOf(body)).toBe(403);
  });

  test.each([
    ['not JSON', 'not json'],
    ['JSON but not an object', '[1,2]'],
    ['no MessageId (and unsigned)', without('MessageId', 'Signature')],
    ['unknown Type', { ...signed, Type: 'Other' }],
    ['SubscriptionConfirmation without SubscribeURL', { ...signed, Type: 'SubscriptionConfirmation', Token: 't' }],
  ])('%s: 400', (_what, body) => {
    expect(statusOf(body)).toBe(400);
  });
});
