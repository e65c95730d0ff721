/**
 * Delivery to Amazon SES (API v2 `SendEmail` with raw MIME content), behind the {@link MailTransport}
 * interface so the send path does not care whether it talks to AWS or the local emulator (`SES_ENDPOINT`). A
 * transport's first call goes through the SDK's client; later ones are the lean request of `./lean-send` (the SDK's
 * first request replayed, signed and sent by the SDK's own signer and request handler, errors read by its protocol).
 *
 * @module
 */
import {
  SESv2Client,
  SendEmailCommand,
  type SendEmailCommandInput,
  type ServiceInputTypes,
  type ServiceOutputTypes,
} from '@aws-sdk/client-sesv2';
import { getUserAgentMiddlewareOptions, userAgentMiddleware } from '@aws-sdk/core/client';
import { HttpRequest } from '@smithy/protocol-http';
import type { BuildHandlerArguments, BuildMiddleware, FinalizeRequestMiddleware } from '@smithy/types';
import type { MailConfig } from '@mailroom/mail/config';
import {
  configurationSetFor,
  DEFAULT_CONNECTION,
  type ConfigurationSets,
  type MailStream,
} from '@mailroom/mail/connections';
import { trackingConfigurationSetName } from '@mailroom/mail/tracking';
import type { NormalizedEmail } from '@mailroom/platform/address';
import { LeanSendEmail, requestTemplate } from './lean-send';

/** One raw message to hand over. */
export interface OutboundMessage {
  /** RFC 5322 bytes (see `buildMime`). */
  raw: Buffer;
  from: string;
  /** Recipients as stored when the email was accepted (normalised there, not again on the way to SES). */
  to: NormalizedEmail[];
  /** SES message tags (`[A-Za-z0-9_-]` names and values), returned on SES events. */
  tags?: Record<string, string>;
  /** The send's lane priority (the send queue's: lower first), handed to the rate gate. */
  priority?: number;
  /**
   * The delivery connection bound to the message (`SES_CONNECTIONS` name: its domain's, else its project's); read
   * by the connection router (`connections.ts`), which may fail over from it. Unset: the router looks the
   * binding up from `from` and `projectId`. A single {@link SesTransport} ignores it.
   */
  connection?: string;
  /** The project sending (for the connection binding of its domains). */
  projectId?: string;
  /** The mail stream (the email's `marketing`): with `tracking` it picks the configuration set. Default transactional. */
  stream?: MailStream;
  /** Open and click tracking (the email's `tracking`, decided at acceptance). Default on. */
  tracking?: boolean;
  /**
   * The sending domain's custom tracking domain, once its configuration sets were made on delivery connection
   * `connection`: a tracked message sent through that connection goes through the set redirecting via `domain`.
   */
  trackingDomain?: { domain: string; connection: string };
  /**
   * A stable id of the message (the email id): a message whose SES answer was lost is pinned to the connection
   * that had it, so a retry never goes through another one.
   */
  key?: string;
}

/** Something that accepts a message and returns the provider's message id. */
export interface MailTransport {
  /**
   * @returns the provider's message id, and the delivery connection that took the message when there are several.
   * @throws the provider's error; classify it with {@link classifySendError}.
   */
  send(message: OutboundMessage): Promise<{ messageId: string; connection?: string }>;
  close(): void;
}

/** How the worker must treat a failed send. */
export type SendErrorClass =
  /** Over the account's rate or quota, or sending paused: try again later without spending an attempt. */
  | { kind: 'throttled'; retryInMs: number; reason: string }
  /**
   * SES could not be reached at all (connection refused or reset, DNS, no answer within `SES_TIMEOUT_MS`): an
   * outage, not this message's fault. Try again later without spending an attempt, however long it lasts.
   */
  | { kind: 'unreachable'; reason: string }
  /** SES answered with a 5xx (or something unforeseen happened): retry with backoff, spending an attempt. */
  | { kind: 'transient'; reason: string }
  /** SES refused the message itself: retrying cannot help. */
  | { kind: 'permanent'; reason: string };

const THROTTLED: Record<string, number> = {
  TooManyRequestsException: 1_000,
  ThrottlingException: 1_000,
  Throttling: 1_000,
  LimitExceededException: 60_000,
  // Account-level stops: the mail waits (it is never dropped) until the operator resolves them.
  SendingPausedException: 60_000,
  AccountSuspendedException: 300_000,
};

/** Socket and timeout errors: the request never got an answer from SES. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'TimeoutError',
  'RequestTimeout',
]);

const PERMANENT = new Set([
  'MessageRejected',
  'MailFromDomainNotVerifiedException',
  'NotFoundException',
  'BadRequestException',
  'InvalidParameterValue',
]);

/**
 * Classifies an error thrown by {@link MailTransport.send}, per the SES v2 `SendEmail` error list
 * (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html#API_SendEmail_Errors).
 */
export function classifySendError(err: unknown): SendErrorClass {
  const e = err as {
    name?: string;
    message?: string;
    code?: string;
    $metadata?: { httpStatusCode?: number };
    $retryable?: unknown;
  };
  const name = e.name ?? 'Error';
  const reason = `${name}: ${e.message ?? 'unknown error'}`.slice(0, 1000);
  const throttledMs = THROTTLED[name];
  if (throttledMs !== undefined) return { kind: 'throttled', retryInMs: throttledMs, reason };
  const status = e.$metadata?.httpStatusCode;
  if (status === 429) return { kind: 'throttled', retryInMs: 1_000, reason };
  if (PERMANENT.has(name)) return { kind: 'permanent', reason };
  if (status !== undefined && status >= 400 && status < 500) return { kind: 'permanent', reason };
  if (
    status === undefined &&
    (UNREACHABLE.has(name) ||
      (e.code !== undefined && UNREACHABLE.has(e.code)) ||
      /socket hang up/i.test(e.message ?? ''))
  ) {
    return { kind: 'unreachable', reason };
  }
  return { kind: 'transient', reason };
}

/** The User-Agent headers the SDK's step sets (`user-agent`, and `x-amz-user-agent` where it sets one). */
const USER_AGENT_HEADERS = ['user-agent', 'x-amz-user-agent'] as const;

/**
 * The SDK's own User-Agent step (`getUserAgentMiddleware`), run for the client's first request only; every later
 * request gets the header values that run produced. The step rebuilds the same value on every send (the default
 * user-agent provider awaited, each section escaped, the feature list encoded): measured, about 50 µs of CPU of the
 * 450 µs a `SendEmail` call costs the process (11%). What it builds depends only on the client's configuration and
 * the features the client uses, fixed once the client is built (one operation, one retry mode, one endpoint, one
 * credentials source), so the replayed value is the one the step would have built.
 *
 * @param config - the client's resolved configuration (`client.config`).
 */
function replayedUserAgent(
  config: Parameters<typeof userAgentMiddleware>[0],
): BuildMiddleware<ServiceInputTypes, ServiceOutputTypes> {
  const sdkStep = userAgentMiddleware(config);
  let recorded: [string, string][] | undefined;
  return (next, context) => {
    // The SDK's step, with a look at the headers it set on their way to the next step.
    const first = sdkStep(async (args: BuildHandlerArguments<ServiceInputTypes>) => {
      const headers = (args.request as { headers?: Record<string, string> }).headers;
      if (headers)
        recorded = USER_AGENT_HEADERS.flatMap((name) =>
          headers[name] === undefined ? [] : [[name, headers[name]] as [string, string]],
        );
      return next(args);
    }, context);
    return async (args) => {
      const headers = (args.request as { headers?: Record<string, string> }).headers;
      if (!recorded || !headers) return first(args);
      for (const [name, value] of recorded) headers[name] = value;
      return next(args);
    };
  };
}

/** SDK middleware the transport removes from its client (see the constructor). */
const UNUSED_MIDDLEWARE = ['loggerMiddleware', 'recursionDetectionMiddleware'];

/** The SES v2 implementation. */
export class SesTransport implements MailTransport {
  private readonly client: SESv2Client;
  private readonly gate: { acquire(priority?: number): Promise<unknown> } | undefined;
  private readonly observe: ((ms: number, ok: boolean) => void) | undefined;
  /**
   * The priority of each send's command input, read by the gate's step from the input it is handed (the gate is
   * asked from inside the middleware stack). Not an `AsyncLocalStorage`: one in use turns on promise hooks for every
   * promise of the process (profiled: about 2% of the worker's CPU in \`npm run bench -- worker\`).
   */
  private readonly priority = new WeakMap<object, number>();
  /**
   * Sends after the first: the request the SDK built for the first send, replayed with each message's body, signed
   * and sent by the SDK's own signer and request handler, errors read by its own protocol ({@link LeanSendEmail}).
   */
  private lean: LeanSendEmail | undefined;

  /**
   * @param gate - when given, every `SendEmail` waits for a slot after it is signed, immediately before it is
   *   written to the network (see {@link SendRateGate}), in the order of the messages' `priority`.
   * @param observe - told how long each request took on the wire (ms, after the gate) and whether it succeeded.
   *
   * A call that gets no complete answer within `SES_TIMEOUT_MS` (the rate gate's wait not included) is aborted
   * with a `TimeoutError` (`ETIMEDOUT`): SES unreachable, retried without spending an attempt. The SDK's
   * `requestTimeout` alone only logs a warning (`throwOnRequestTimeout` is off by default), so an endpoint that
   * accepts the connection and never answers held each send for its 300 s socket timeout.
   */
  constructor(
    private readonly config: Pick<
      MailConfig,
      'sesRegion' | 'sesEndpoint' | 'awsCredentials' | 'sesConfigurationSet' | 'sesTimeoutMs'
    > &
      Partial<
        Pick<
          MailConfig,
          'sesConfigurationSetNoTracking' | 'sesConfigurationSetMarketing' | 'sesConfigurationSetMarketingNoTracking'
        >
      > & {
        sesProfile?: string;
        /** The stream × tracking sets (a delivery connection's); unset: read from the `sesConfigurationSet*` fields. */
        sesConfigurationSets?: ConfigurationSets;
        /** The delivery connection this transport is (default `default`). */
        sesConnectionName?: string;
      },
    gate?: { acquire(priority?: number): Promise<unknown> },
    observe?: (ms: number, ok: boolean) => void,
  ) {
    const timeoutMs = config.sesTimeoutMs;
    this.client = new SESv2Client({
      region: config.sesRegion,
      endpoint: config.sesEndpoint,
      credentials:
        config.awsCredentials ??
        (config.sesEndpoint && !config.sesProfile ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined),
      // A delivery connection's named profile of the AWS shared config files (it may assume a role).
      ...(config.sesProfile ? { profile: config.sesProfile } : {}),
      // One attempt per call: retries are the queue's business (backoff, throttling, attempt counting).
      maxAttempts: 1,
      // The middleware stack is resolved once per command class instead of on every send (it is fixed after the
      // constructor): measured, resolving it was 3% of the worker's CPU in \`npm run bench -- worker\`.
      cacheMiddleware: true,
      requestHandler: {
        connectionTimeout: Math.min(5_000, timeoutMs),
        requestTimeout: timeoutMs,
        // Without it the SDK only warns when requestTimeout passes and keeps waiting.
        throwOnRequestTimeout: true,
      },
    });
    // Steps that do nothing here, each paid on every send (profiled): the logger step (no logger: it still builds
    // the redacted copy of the input and output) and Lambda's recursion detection (not run on Lambda). The retry
    // step stays (one attempt: a pass-through), as signing is placed relative to it.
    for (const name of UNUSED_MIDDLEWARE) this.client.middlewareStack.remove(name);
    // The same User-Agent, built once (see replayedUserAgent): in the SDK's step's place, under its name.
    this.client.middlewareStack.add(replayedUserAgent(this.client.config), {
      ...getUserAgentMiddlewareOptions,
      override: true,
    });
    // The first SendEmail request the SDK builds (before signing) is the template of the lean sends.
    const keepTemplate: FinalizeRequestMiddleware<ServiceInputTypes, ServiceOutputTypes> =
      (next, context) => (args) => {
        if (!this.lean && context.commandName === 'SendEmailCommand' && HttpRequest.isInstance(args.request))
          this.lean = new LeanSendEmail(this.client, requestTemplate(args.request));
        return next(args);
      };
    this.client.middlewareStack.addRelativeTo(keepTemplate, {
      name: 'mailroomLeanSendTemplate',
      relation: 'before',
      toMiddleware: 'httpSigningMiddleware',
    });
    this.gate = gate;
    this.observe = observe;
    if (gate) {
      const waitForSlot: FinalizeRequestMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next) => async (args) => {
        await gate.acquire(this.priority.get(args.input));
        const started = performance.now();
        try {
          const out = await next(args);
          observe?.(performance.now() - started, true);
          return out;
        } catch (err) {
          observe?.(performance.now() - started, false);
          throw err;
        }
      };
      this.client.middlewareStack.addRelativeTo(waitForSlot, {
        name: 'mailroomSendRateGate',
        relation: 'after',
        toMiddleware: 'httpSigningMiddleware',
      });
    }
  }

  /**
   * The configuration set of `message`: the stream × tracking cell of this connection ({@link configurationSetFor}),
   * or, for tracked mail from a domain whose custom tracking domain is ready on this connection, the set made for
   * that domain from it.
   */
  configurationSetOf(message: Pick<OutboundMessage, 'stream' | 'tracking' | 'trackingDomain'>): string | undefined {
    const c = this.config;
    const sets: ConfigurationSets = c.sesConfigurationSets ?? {
      configurationSet: c.sesConfigurationSet,
      configurationSetNoTracking: c.sesConfigurationSetNoTracking,
      configurationSetMarketing: c.sesConfigurationSetMarketing,
      configurationSetMarketingNoTracking: c.sesConfigurationSetMarketingNoTracking,
    };
    const tracking = message.tracking !== false;
    const name = configurationSetFor(sets, message.stream ?? 'transactional', tracking);
    const custom = message.trackingDomain;
    if (!name || !tracking || !custom || custom.connection !== (c.sesConnectionName ?? DEFAULT_CONNECTION)) return name;
    return trackingConfigurationSetName(name, custom.domain);
  }

  async send(message: OutboundMessage): Promise<{ messageId: string }> {
    if (this.lean) {
      const gate = this.gate;
      const messageId = await this.lean.send(
        {
          FromEmailAddress: message.from,
          ToAddresses: message.to,
          raw: message.raw,
          ConfigurationSetName: this.configurationSetOf(message),
          EmailTags: Object.entries(message.tags ?? {}).map(([Name, Value]) => ({ Name, Value })),
        },
        gate && (() => gate.acquire(message.priority)),
        gate && this.observe,
      );
      if (!messageId) throw Object.assign(new Error('SES returned no MessageId'), { name: 'MissingMessageId' });
      return { messageId };
    }
    const input: SendEmailCommandInput = {
      FromEmailAddress: message.from,
      Destination: { ToAddresses: message.to },
      Content: { Raw: { Data: message.raw } },
      ConfigurationSetName: this.configurationSetOf(message),
      EmailTags: Object.entries(message.tags ?? {}).map(([Name, Value]) => ({ Name, Value })),
    };
    if (message.priority !== undefined) this.priority.set(input, message.priority);
    const out = await this.client.send(new SendEmailCommand(input));
    if (!out.MessageId) throw Object.assign(new Error('SES returned no MessageId'), { name: 'MissingMessageId' });
    return { messageId: out.MessageId };
  }

  close(): void {
    this.client.destroy();
  }
}
