/**
 * The transport's lean `SendEmail` (every send after its first) against a plain `SESv2Client`, over a loopback
 * server that answers as SES v2 does (restJson1): the same request on the wire, the same errors thrown for SES's
 * refusals, the same classification, the rate gate asked with each send's priority, the timeout kept.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest } from '@smithy/protocol-http';
import { SignatureV4 } from '@smithy/signature-v4';
import { classifySendError, SesTransport } from './transport';
import { normalizeEmail } from '@mailroom/platform/address';

interface Seen {
  method?: string;
  url?: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A loopback SES: answers each request with `answer()` (status, error type, message) or a MessageId. */
async function fakeSes(answer: () => { status: number; type?: string; message?: string; never?: boolean }) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() });
      const a = answer();
      if (a.never) return;
      if (a.status === 200)
        return res
          .writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': `r-${seen.length}` })
          .end(JSON.stringify({ MessageId: `m-${seen.length}` }));
      res
        .writeHead(a.status, {
          'content-type': 'application/json',
          'x-amzn-errortype': `${a.type}:http://internal.amazon.com/coral/com.amazonaws.sesv2/`,
          'x-amzn-requestid': `r-${seen.length}`,
        })
        .end(JSON.stringify({ message: a.message }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { seen, server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const config = (endpoint: string, sesTimeoutMs = 5_000) => ({
  sesRegion: 'us-east-1',
  sesEndpoint: endpoint,
  awsCredentials: undefined,
  sesConfigurationSet: 'set-1',
  sesTimeoutMs,
});

const message = (priority?: number) => ({
  raw: Buffer.from('From: a@b.test\r\nTo: c@d.test\r\nSubject: hi\r\n\r\nhello ünïcode'),
  from: 'a@b.test',
  to: [normalizeEmail('c@d.test'), normalizeEmail('e@f.test')],
  tags: { email_id: 'e-1', project: 'p-1' },
  ...(priority === undefined ? {} : { priority }),
});

/** The error a plain client throws for the same answer. */
async function sdkError(endpoint: string): Promise<Record<string, unknown>> {
  const plain = new SESv2Client({
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  try {
    await plain.send(
      new SendEmailCommand({ FromEmailAddress: 'a@b.test', Content: { Raw: { Data: Buffer.from('x') } } }),
    );
  } catch (err) {
    return err as Record<string, unknown>;
  } finally {
    plain.destroy();
  }
  throw new Error('expected an error');
}

/** The SigV4 `Authorization` of `seen` recomputed from what the server received (the headers it signed). */
async function authorizationOf(seen: Seen): Promise<string> {
  const auth = String(seen.headers.authorization);
  const signedHeaders = /SignedHeaders=([^,]+)/.exec(auth)![1].split(';');
  const headers: Record<string, string> = {};
  for (const name of signedHeaders) headers[name] = String(seen.headers[name]);
  const stamp = String(seen.headers['x-amz-date']);
  const date = new Date(
    `${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T${stamp.slice(9, 11)}:${stamp.slice(11, 13)}:${stamp.slice(13, 15)}Z`,
  );
  const signer = new SignatureV4({
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    region: 'us-east-1',
    service: 'ses',
    sha256: Sha256,
  });
  const signed = await signer.sign(
    new HttpRequest({ method: seen.method, hostname: '127.0.0.1', path: seen.url, headers, body: seen.body }),
    { signingDate: date },
  );
  return signed.headers.authorization;
}

test('a lean send puts the request the SDK puts on the wire, signed, with a fresh invocation id', async () => {
  const ses = await fakeSes(() => ({ status: 200 }));
  const transport = new SesTransport(config(ses.endpoint));
  try {
    const first = await transport.send(message());
    const second = await transport.send(message());
    expect([first.messageId, second.messageId]).toEqual(['m-1', 'm-2']);
    const [sdk, lean] = ses.seen;
    expect(lean.method).toBe(sdk.method);
    expect(lean.url).toBe(sdk.url);
    expect(JSON.parse(lean.body)).toEqual(JSON.parse(sdk.body));
    const perRequest = ['authorization', 'x-amz-date', 'amz-sdk-invocation-id', 'x-amz-content-sha256'];
    expect(Object.keys(lean.headers).sort()).toEqual(Object.keys(sdk.headers).sort());
    for (const name of Object.keys(sdk.headers).filter((n) => !perRequest.includes(n)))
      expect([name, lean.headers[name]]).toEqual([name, sdk.headers[name]]);
    expect(lean.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=local\/\d{8}\/us-east-1\/ses\/aws4_request, SignedHeaders=\S+, Signature=[0-9a-f]{64}$/,
    );
    expect(lean.headers['x-amz-content-sha256']).toBe(createHash('sha256').update(lean.body).digest('hex'));
    expect(lean.headers['amz-sdk-invocation-id']).not.toBe(sdk.headers['amz-sdk-invocation-id']);
    // The signature checks out: SigV4 over the request as received gives the same Authorization.
    expect(await authorizationOf(lean)).toBe(lean.headers.authorization);
    expect(await authorizationOf(sdk)).toBe(sdk.headers.authorization);
  } finally {
    transport.close();
    ses.server.close();
  }
});

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
])('a lean send refused %i %s throws what the SDK throws (%s)', async (status, type, msg, kind) => {
  let refuse = false;
  const ses = await fakeSes(() => (refuse ? { status, type, message: msg } : { status: 200 }));
  const transport = new SesTransport(config(ses.endpoint));
  try {
    await transport.send(message());
    refuse = true;
    const lean = (await transport.send(message()).then(
      () => {
        throw new Error('expected a refusal');
      },
      (err: unknown) => err,
    )) as Record<string, unknown>;
    const sdk = await sdkError(ses.endpoint);
    expect(lean.name).toBe(type);
    expect(lean.message).toBe(msg);
    expect(lean.constructor).toBe(sdk.constructor);
    expect(lean.$fault).toBe(sdk.$fault);
    expect(lean.$metadata).toEqual({ ...(sdk.$metadata as object), requestId: 'r-2' });
    expect(classifySendError(lean)).toEqual(classifySendError(sdk));
    expect(classifySendError(lean).kind).toBe(kind);
  } finally {
    transport.close();
    ses.server.close();
  }
});

test('a lean send with no answer within SES_TIMEOUT_MS is given up as unreachable', async () => {
  let freeze = false;
  const ses = await fakeSes(() => (freeze ? { status: 200, never: true } : { status: 200 }));
  const transport = new SesTransport(config(ses.endpoint, 300));
  try {
    await transport.send(message());
    freeze = true;
    const started = Date.now();
    const err = await transport.send(message()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifySendError(err).kind).toBe('unreachable');
    expect(Date.now() - started).toBeLessThan(5_000);
  } finally {
    transport.close();
    ses.server.closeAllConnections();
    ses.server.close();
  }
});

test('lean sends ask the rate gate with their own priority, before the request is written', async () => {
  const ses = await fakeSes(() => ({ status: 200 }));
  const asked: (number | undefined)[] = [];
  const observed: boolean[] = [];
  const gate = {
    acquire: async (priority?: number) => {
      await new Promise((r) => setTimeout(r, 5));
      asked.push(priority);
      if (priority === 10) throw new Error('refused 10');
    },
  };
  const transport = new SesTransport(config(ses.endpoint), gate, (_ms, ok) => observed.push(ok));
  try {
    await transport.send(message(2));
    const results = await Promise.allSettled([
      transport.send(message(10)),
      transport.send(message(1)),
      transport.send(message(5)),
      transport.send(message()),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(asked.slice(1).sort()).toEqual([1, 10, 5, undefined].sort());
    // The refused one never reached SES.
    expect(ses.seen).toHaveLength(4);
    expect(observed).toEqual([true, true, true, true]);
  } finally {
    transport.close();
    ses.server.close();
  }
});
