/**
 * SES v2's REST-JSON API on a loopback HTTP server, answering what the test scripts: for the parts of SES the
 * emulator lacks (identities, configuration sets, the account), tested against answers shaped as the SES v2 API
 * reference's response syntax. An error answer carries SES's error form: the `x-amzn-errortype` header
 * (`<type>:http://internal.amazon.com/coral/com.amazonaws.sesv2/`) and a `{message}` body. Every request is
 * recorded. {@link useSesAnswers} registers the server's start and close, and clears the script before each test.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One answer: the HTTP status, the JSON body, and for an error its SES error type (`BadRequestException`, …). */
export interface SesAnswer {
  status: number;
  body: object;
  error?: string;
}

/** The scripted SES; {@link SesAnswers.endpoint} throws when asked before `beforeAll` started the server. */
export interface SesAnswers {
  /** Answers for the requests `METHOD /path` (`POST /v2/email/identities`), taken in order. */
  readonly byRequest: Record<string, SesAnswer[]>;
  /** Answers for any request without one in {@link byRequest}, taken in order; past them, a 500 `InternalFailure`. */
  readonly next: SesAnswer[];
  /** Every request since the last test began: method, path and body. */
  readonly seen: { method: string; path: string; body: string }[];
  /** The server's origin, `http://127.0.0.1:<port>` (the `SES_ENDPOINT` to give a client). */
  readonly endpoint: string;
}

/**
 * Registers the `beforeAll` that starts the server, the `beforeEach` that clears the script, and the closing
 * `afterAll`.
 */
export function useSesAnswers(): SesAnswers {
  const byRequest: Record<string, SesAnswer[]> = {};
  const next: SesAnswer[] = [];
  const seen: SesAnswers['seen'] = [];
  let server: http.Server | undefined;
  let endpoint: string | undefined;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const key = `${req.method} ${req.url}`;
        seen.push({ method: req.method!, path: req.url!, body });
        const a = byRequest[key]?.shift() ??
          next.shift() ?? { status: 500, body: { message: `no answer for ${key}` }, error: 'InternalFailure' };
        res.writeHead(a.status, {
          'content-type': 'application/json',
          'x-amzn-requestid': 'r-1',
          ...(a.error
            ? { 'x-amzn-errortype': `${a.error}:http://internal.amazon.com/coral/com.amazonaws.sesv2/` }
            : {}),
        });
        res.end(JSON.stringify(a.body));
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));
  beforeEach(() => {
    for (const key of Object.keys(byRequest)) delete byRequest[key];
    next.length = 0;
    seen.length = 0;
  });
  return {
    byRequest,
    next,
    seen,
    get endpoint() {
      if (!endpoint) throw new Error('useSesAnswers: the server starts in beforeAll');
      return endpoint;
    },
  };
}
