/**
 * SES error classification, exercised through the real SDK: each case is an HTTP response as SES v2 returns it
 * (restJson1: status, `x-amzn-ErrorType` header, JSON body), deserialised by @aws-sdk/client-sesv2 into the error
 * the worker actually sees.
 */
import { HttpResponse } from '@smithy/protocol-http';
import { Readable } from 'node:stream';
import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { classifySendError, SesTransport } from './transport';
import { normalizeEmail } from '@mailroom/platform/address';

function clientAnswering(status: number, errorType: string, message: string): SESv2Client {
  return new SESv2Client({
    region: 'us-east-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
    maxAttempts: 1,
    requestHandler: {
      handle: async () => ({
        response: new HttpResponse({
          statusCode: status,
          headers: {
            'content-type': 'application/json',
            'x-amzn-errortype': `${errorType}:http://internal.amazon.com/coral/com.amazonaws.sesv2/`,
            'x-amzn-requestid': 'r-1',
          },
          body: Readable.from([Buffer.from(JSON.stringify({ message }))]),
        }),
      }),
    },
  });
}

async function errorFrom(status: number, type: string, message: string): Promise<unknown> {
  const client = clientAnswering(status, type, message);
  try {
    await client.send(
      new SendEmailCommand({ FromEmailAddress: 'a@b.test', Content: { Raw: { Data: Buffer.from('x') } } }),
    );
  } catch (err) {
    return err;
  } finally {
    client.destroy();
  }
  throw new Error('expected an error');
}

test.each([
  [429, 'TooManyRequestsException', 'Maximum sending rate exceeded.', 'throttled'],
  [400, 'LimitExceededException', 'Daily message quota exceeded.', 'throttled'],
  [400, 'SendingPausedException', 'Sending is paused for this account.', 'throttled'],
  [400, 'AccountSuspendedException', 'The account has been suspended.', 'throttled'],
  [400, 'MessageRejected', 'Email address is not verified.', 'permanent'],
  [400, 'MailFromDomainNotVerifiedException', 'MAIL FROM domain not verified', 'permanent'],
  [404, 'NotFoundException', 'Configuration set does not exist.', 'permanent'],
  [400, 'BadRequestException', 'Illegal address', 'permanent'],
  [500, 'InternalFailure', 'Internal error', 'transient'],
  [503, 'ServiceUnavailable', 'Service unavailable', 'transient'],
])('%i %s → %s', async (status, type, message, kind) => {
  const err = await errorFrom(status, type, message);
  const c = classifySendError(err);
  expect(c.kind).toBe(kind);
  expect(c.reason).toBe(`${type}: ${message}`);
});

test('SES not answering at all is "unreachable" (no attempt spent), not a transient failure of the message', () => {
  expect(classifySendError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })).kind).toBe(
    'unreachable',
  );
  expect(classifySendError(Object.assign(new Error('timed out'), { name: 'TimeoutError' })).kind).toBe('unreachable');
  expect(classifySendError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })).kind).toBe(
    'unreachable',
  );
  expect(
    classifySendError(
      Object.assign(new Error('getaddrinfo EAI_AGAIN email.us-east-1.amazonaws.com'), { code: 'EAI_AGAIN' }),
    ).kind,
  ).toBe('unreachable');
  // An answer, even a 5xx, is not unreachability: it spends an attempt.
  expect(
    classifySendError(
      Object.assign(new Error('Service unavailable'), {
        name: 'ServiceUnavailable',
        $metadata: { httpStatusCode: 503 },
      }),
    ).kind,
  ).toBe('transient');
});

test('each send asks the rate gate with its own priority (concurrent sends keep theirs)', async () => {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ MessageId: 'm-1' })),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const asked: (number | undefined)[] = [];
  // The gate refuses priority 10 only: the send that gets the refusal shows whose priority reached it.
  const gate = {
    acquire: async (priority?: number) => {
      await new Promise((r) => setTimeout(r, 5));
      asked.push(priority);
      if (priority === 10) throw new Error('refused 10');
    },
  };
  const transport = new SesTransport(
    {
      sesRegion: 'us-east-1',
      sesEndpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      awsCredentials: undefined,
      sesConfigurationSet: undefined,
      sesTimeoutMs: 5_000,
    },
    gate,
  );
  try {
    const send = (priority?: number) =>
      transport.send({
        raw: Buffer.from('x'),
        from: 'a@b.test',
        to: [normalizeEmail('c@d.test')],
        ...(priority === undefined ? {} : { priority }),
      });
    const results = await Promise.allSettled([send(10), send(1), send(5), send()]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(asked).toHaveLength(4);
  } finally {
    transport.close();
    server.close();
  }
});

test('every send carries the User-Agent the SDK itself builds, built once and replayed', async () => {
  const seen: Record<string, string | undefined>[] = [];
  const server = http.createServer((req, res) => {
    seen.push({
      'user-agent': req.headers['user-agent'],
      'x-amz-user-agent': req.headers['x-amz-user-agent'] as string | undefined,
      authorization: req.headers.authorization,
    });
    req.resume();
    req.on('end', () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ MessageId: `m-${seen.length}` })),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const config = {
    sesRegion: 'us-east-1',
    sesEndpoint: endpoint,
    awsCredentials: undefined,
    sesConfigurationSet: undefined,
    sesTimeoutMs: 5_000,
  };
  const transport = new SesTransport(config);
  // How often the SDK's step builds the value: it asks the default provider each time it runs.
  const clientConfig = (transport as unknown as { client: SESv2Client }).client.config;
  const provider = clientConfig.defaultUserAgentProvider;
  let built = 0;
  clientConfig.defaultUserAgentProvider = () => {
    built++;
    return provider();
  };
  // The same request from a client with the SDK's own step left in place: what the header must be.
  const plain = new SESv2Client({
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  try {
    await plain.send(
      new SendEmailCommand({
        FromEmailAddress: 'a@b.test',
        Destination: { ToAddresses: ['c@d.test'] },
        Content: { Raw: { Data: Buffer.from('x') } },
      }),
    );
    const send = () => transport.send({ raw: Buffer.from('x'), from: 'a@b.test', to: [normalizeEmail('c@d.test')] });
    // Concurrent first sends (none recorded yet), then sends that replay it.
    const ids = [...(await Promise.all([send(), send(), send()])), await send(), await send()].map((r) => r.messageId);
    expect(new Set(ids).size).toBe(5);
    const [sdk, ...ours] = seen;
    expect(sdk['user-agent']).toMatch(/^aws-sdk-js\/\S+ /);
    for (const headers of ours) {
      expect(headers['user-agent']).toBe(sdk['user-agent']);
      expect(headers['x-amz-user-agent']).toBe(sdk['x-amz-user-agent']);
      // Set before signing: the signature covers it as it covered the SDK's.
      expect(headers.authorization).toMatch(/^AWS4-HMAC-SHA256 /);
    }
    expect(ours).toHaveLength(5);
    // Built by the concurrent first sends only; the two later ones replayed it.
    expect(built).toBe(3);
  } finally {
    transport.close();
    plain.destroy();
    server.close();
  }
});

test('sendBulk: the gate grants one send per entry; a call larger than the gate takes at once goes as several', async () => {
  const asked: (number | undefined)[] = [];
  const gate = { acquire: async (_priority?: number, count?: number) => void asked.push(count), maxBulk: 2 };
  const transport = new SesTransport(
    {
      sesRegion: 'us-east-1',
      sesEndpoint: process.env.TEST_SES_ENDPOINT!,
      awsCredentials: undefined,
      sesConfigurationSet: undefined,
      sesTimeoutMs: 5_000,
    },
    gate,
  );
  try {
    const entries = Array.from({ length: 5 }, (_, i) => ({
      to: `bulk.${i}.${Date.now()}@inbox.test`,
      data: JSON.stringify({ subject: `S${i}`, html: `<p>${i}</p>`, text: `${i}` }),
      headers: [['Precedence', 'bulk']] as [string, string][],
      tags: { email_id: `e${i}` },
      key: `e${i}`,
    }));
    const { outcomes } = await transport.sendBulk({ from: 'News <n@d.example.com>', entries });
    expect(asked).toEqual([2, 2, 1]);
    expect(outcomes).toHaveLength(5);
    expect(outcomes.every((o) => 'messageId' in o && o.messageId.length > 0)).toBe(true);
  } finally {
    transport.close();
  }
});
