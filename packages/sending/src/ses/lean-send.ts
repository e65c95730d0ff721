/**
 * SES v2 `SendEmail` without the SDK's per-call middleware stack: the request the SDK built for a transport's first
 * send is kept as a template (endpoint, path, `Host`, `Content-Type`, the User-Agent headers, `amz-sdk-request`), and
 * each later send fills in its JSON body, is signed by the SDK's own SigV4 signer, and goes out on the SDK's own
 * request handler (its keep-alive agent, connection and request timeouts). Error answers are read by the SDK's own
 * restJson1 protocol, so a refusal is the same error object (`name`, `message`, `$metadata`, `$fault`) a plain
 * `SESv2Client` throws; clock skew is sampled from answers as the SDK's signer does.
 *
 * What it leaves out is what resolved to the same value on every call of a transport: endpoint rules, the
 * middleware chain, the schema walk of the input, the signer looked up per call. Measured: see
 * docs/decisions/0160-lean-ses-send.md.
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import { SendEmail$, type SESv2Client } from '@aws-sdk/client-sesv2';
import { AwsSdkSigV4Signer } from '@aws-sdk/core/httpAuthSchemes';
import { operation } from '@smithy/core/schema';
import { HttpRequest, HttpResponse } from '@smithy/protocol-http';
import type { HeaderBag, HttpRequest as IHttpRequest, OperationSchema, RequestSigner } from '@smithy/types';

/** What one `SendEmail` carries (the fields the transport sets). */
export interface LeanSendInput {
  FromEmailAddress: string;
  ToAddresses: string[];
  raw: Buffer;
  ConfigurationSetName?: string;
  EmailTags: { Name: string; Value: string }[];
}

/** Headers of the template that are per request: set again (or by the signer) on every send. */
const PER_REQUEST = new Set([
  'content-length',
  'amz-sdk-invocation-id',
  'authorization',
  'x-amz-date',
  'x-amz-security-token',
  'x-amz-content-sha256',
]);

/** The request the SDK built for a first send, without its per-request headers. */
export interface RequestTemplate {
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
  headers: HeaderBag;
}

/**
 * Keeps of `request` (an unsigned `SendEmail` request built by the SDK) what every later request of the same
 * client repeats.
 */
export function requestTemplate(request: IHttpRequest): RequestTemplate {
  const headers: HeaderBag = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (!PER_REQUEST.has(name.toLowerCase())) headers[name] = value;
  }
  return {
    protocol: request.protocol,
    hostname: request.hostname,
    ...(request.port === undefined ? {} : { port: request.port }),
    path: request.path,
    headers,
  };
}

/**
 * The restJson1 body of `SendEmail` for `input`: the JSON the SDK serialises for it (members it leaves out when unset
 * left out here too; `Content.Raw.Data` in base64), its members in another order.
 */
export function sendEmailBody(input: LeanSendInput): string {
  const body: Record<string, unknown> = {};
  if (input.ConfigurationSetName !== undefined) body.ConfigurationSetName = input.ConfigurationSetName;
  body.Content = { Raw: { Data: input.raw.toString('base64') } };
  body.Destination = { ToAddresses: input.ToAddresses };
  body.EmailTags = input.EmailTags;
  body.FromEmailAddress = input.FromEmailAddress;
  return JSON.stringify(body);
}

/** A header's value in `headers`, whatever its case. */
function headerOf(headers: HeaderBag, name: string): string | undefined {
  for (const key in headers) if (key.toLowerCase() === name) return headers[key];
  return undefined;
}

/** One client's lean `SendEmail`: see the module comment. */
export class LeanSendEmail {
  private signer: Promise<RequestSigner> | undefined;
  private readonly skew = new AwsSdkSigV4Signer();
  private readonly schema: OperationSchema;

  /**
   * @param client - the transport's client: its resolved configuration (credentials, region, signer, clock offset,
   *   request handler, protocol) is what the requests use.
   * @param template - from {@link requestTemplate} over the client's first request.
   */
  constructor(
    private readonly client: SESv2Client,
    private readonly template: RequestTemplate,
  ) {
    const [, ns, name, traits, input, output] = SendEmail$ as unknown as [
      number,
      string,
      string,
      OperationSchema['traits'],
      OperationSchema['input'],
      OperationSchema['output'],
    ];
    this.schema = operation(ns, name, traits, input, output);
  }

  /**
   * Signs and sends `input`.
   *
   * @param beforeWrite - awaited after signing, immediately before the request is written (the rate gate).
   * @param observe - told how long the request took on the wire (ms, after `beforeWrite`) and whether it succeeded.
   * @returns SES's `MessageId` (undefined when the answer had none).
   * @throws SES's error as the SDK throws it (restJson1 error answers), the request handler's (`TimeoutError`,
   *   socket errors), or an error with `$metadata.httpStatusCode` when a 2xx answer is not JSON.
   */
  async send(
    input: LeanSendInput,
    beforeWrite?: () => Promise<unknown>,
    observe?: (ms: number, ok: boolean) => void,
  ): Promise<string | undefined> {
    const config = this.client.config;
    const body = sendEmailBody(input);
    const t = this.template;
    const request = new HttpRequest({
      method: 'POST',
      protocol: t.protocol,
      hostname: t.hostname,
      ...(t.port === undefined ? {} : { port: t.port }),
      path: t.path,
      headers: {
        ...t.headers,
        'amz-sdk-invocation-id': randomUUID(),
        'content-length': String(Buffer.byteLength(body)),
      },
      body,
    });
    // Made once (a failure is not kept: the next send asks again).
    this.signer ??= config.signer().catch((err: unknown) => {
      this.signer = undefined;
      throw err;
    });
    const signer = await this.signer;
    const props = {
      config,
      _preRequestSystemClockOffset: config.systemClockOffset,
      _requestSentAt: Date.now(),
    };
    const signed = await signer.sign(request, { signingDate: new Date(Date.now() + config.systemClockOffset) });
    if (beforeWrite) await beforeWrite();
    const started = performance.now();
    let ok = false;
    try {
      const handler = config.requestHandler as unknown as {
        handle(request: HttpRequest): Promise<{ response: HttpResponse }>;
      };
      const { response } = await handler.handle(signed as HttpRequest);
      const bytes = await config.streamCollector(response.body);
      if (response.statusCode >= 300) {
        await this.throwError(new HttpResponse({ ...response, body: bytes }), props);
      }
      this.skew.successHandler(response, props);
      let out: { MessageId?: string };
      try {
        out = bytes.byteLength ? (JSON.parse(Buffer.from(bytes).toString('utf8')) as { MessageId?: string }) : {};
      } catch (err) {
        throw Object.assign(err as Error, { $metadata: { httpStatusCode: response.statusCode } });
      }
      ok = true;
      return out.MessageId;
    } finally {
      observe?.(performance.now() - started, ok);
    }
  }

  /** Throws the error the SDK's restJson1 protocol reads from `response` (never returns). */
  private async throwError(response: HttpResponse, props: Record<string, unknown>): Promise<never> {
    const config = this.client.config;
    let error: unknown;
    try {
      const protocol = config.protocol as unknown as {
        deserializeResponse(schema: OperationSchema, context: object, response: HttpResponse): Promise<unknown>;
      };
      await protocol.deserializeResponse(this.schema, { ...config }, response);
      error = new Error('SES answered an error status the protocol did not read as an error');
    } catch (err) {
      error = err;
    }
    const e = error as { $metadata?: object; $response?: HttpResponse };
    if (typeof error === 'object' && error !== null) {
      Object.defineProperty(error, '$response', { value: response, enumerable: false, configurable: true });
      // As the SDK's deserialisation step does for an answer its protocol could not read.
      e.$metadata ??= {
        httpStatusCode: response.statusCode,
        requestId: headerOf(response.headers, 'x-amzn-requestid'),
      };
      // As the SDK's retry step (one attempt) records on every error.
      Object.assign(e.$metadata, { attempts: 1, totalRetryDelay: 0 });
    }
    this.skew.errorHandler(props)(error as Error);
    throw error;
  }
}
