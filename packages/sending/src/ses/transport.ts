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
  SendBulkEmailCommand,
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
import { classifySendError, type SendErrorClass } from './send-errors';

export { classifySendError, type SendErrorClass };
import {
  bulkEmailInput,
  bulkEntryOutcomes,
  wholeCallFailed,
  type BulkEntryOutcome,
  type BulkOutbound,
} from './bulk-send';

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
  /**
   * Sends the entries of `call` in one SES `SendBulkEmail` (`./bulk-send`). Absent: the transport sends one
   * message at a time.
   * @returns each entry's outcome in entry order, and the delivery connection that took the call.
   * @throws the provider's error for the whole call (nothing of it was accepted, or its answer was lost);
   *   classify it with {@link classifySendError}.
   */
  sendBulk?(call: BulkOutbound): Promise<{ outcomes: BulkEntryOutcome[]; connection?: string }>;
  /**
   * The send rate (emails/s) of `connection` (unset: the default) now, as its gate grants it (`SendGate.rate`).
   * Absent or undefined: not known here.
   */
  sendRate?(connection?: string): number | undefined;
  close(): void;
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

/**
 * A delivery connection's send-rate gate as the transport asks it (`SendRateGate.acquire`): `count` grants (a bulk
 * call's entries, default 1) in `priority` order.
 */
export interface SendGate {
  acquire(priority?: number, count?: number): Promise<unknown>;
  /**
   * The most entries one bulk call may carry: no more than a second holds at the rate in force, nor (with a bounded
   * wait at the gate) than it grants within that wait. Unset: no bound.
   */
  readonly maxBulk?: number;
  /** The rate the gate grants now (emails/s). Unset: not known. */
  readonly rate?: number;
}

/** SDK middleware the transport removes from its client (see the constructor). */
const UNUSED_MIDDLEWARE = ['loggerMiddleware', 'recursionDetectionMiddleware'];

/** The SES v2 implementation. */
export class SesTransport implements MailTransport {
  private readonly client: SESv2Client;
  private readonly gate: SendGate | undefined;
  private readonly observe: ((ms: number, ok: boolean) => void) | undefined;
  /**
   * The priority of each send's command input and the messages it carries, read by the gate's step from the input
   * it is handed (the gate is asked from inside the middleware stack). Not an `AsyncLocalStorage`: one in use turns
   * on promise hooks for every promise of the process (profiled: about 2% of the worker's CPU in \`npm run bench --
   * worker\`).
   */
  private readonly asks = new WeakMap<object, { priority?: number; count: number }>();
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
    gate?: SendGate,
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
        const ask = this.asks.get(args.input);
        await gate.acquire(ask?.priority, ask?.count);
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
    if (message.priority !== undefined) this.asks.set(input, { priority: message.priority, count: 1 });
    const out = await this.client.send(new SendEmailCommand(input));
    if (!out.MessageId) throw Object.assign(new Error('SES returned no MessageId'), { name: 'MissingMessageId' });
    return { messageId: out.MessageId };
  }

  /**
   * One `SendBulkEmail` through the SDK's client (its per-call cost is shared by the call's entries), through the
   * configuration set of the call's stream and tracking; the gate grants one send per entry before the request is
   * written. A call of more entries than the gate takes at once (`SendGate.maxBulk`) is split into calls of at most
   * that many: one request is one burst, and no second may see more than the rate. Once one of them was sent, a later one's error
   * is its entries' (`wholeCall`), not thrown.
   */
  async sendBulk(call: BulkOutbound): Promise<{ outcomes: BulkEntryOutcome[] }> {
    const most = Math.max(1, Math.floor(this.gate?.maxBulk ?? call.entries.length));
    if (call.entries.length > most) {
      const outcomes: BulkEntryOutcome[] = [];
      for (let from = 0; from < call.entries.length; from += most) {
        const entries = call.entries.slice(from, from + most);
        try {
          outcomes.push(...(await this.sendBulk({ ...call, entries })).outcomes);
        } catch (err) {
          if (from === 0) throw err;
          outcomes.push(...wholeCallFailed(call.entries.slice(from), err));
          break;
        }
      }
      return { outcomes };
    }
    const input = bulkEmailInput(call, this.configurationSetOf(call));
    this.asks.set(input, { priority: call.priority, count: call.entries.length });
    const out = await this.client.send(new SendBulkEmailCommand(input));
    return { outcomes: bulkEntryOutcomes(out.BulkEmailEntryResults, call.entries.length) };
  }

  sendRate(): number | undefined {
    return this.gate?.rate;
  }

  close(): void {
    this.client.destroy();
  }
}
