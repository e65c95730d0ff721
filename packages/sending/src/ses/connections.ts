/**
 * Several SES delivery connections behind one {@link MailTransport}: each message goes through the connection
 * bound to it (its sending domain's, else its project's, else the first: `default`), unless that connection is
 * unhealthy ({@link ConnectionHealth}); then through the first other healthy connection whose SES has the domain
 * verified, and back to the bound one once it is healthy again.
 *
 * One email is never sent through two connections: a send job makes one SES call per claim (`job.ts`), and the
 * outcome SES gave is kept until it is recorded (`ses-accepted.ts`). What is left is a call whose answer was lost
 * (a timeout, a connection cut after the request left): SES may have the message. Such a message is pinned to
 * the connection that had it (`<QUEUE_PREFIX>:ses-pinned:<key>`, 7 days), and its retries go there whatever
 * the health, exactly as with one connection.
 *
 * @module
 */
import type { Redis, Cluster } from 'ioredis';
import { type Logger, logged } from '@mailroom/platform/logger';
import { classifySendError, type MailTransport, type OutboundMessage } from './transport';
import { isConnectionFailure, type ConnectionHealth } from './connection-health';
import { GateBusyError } from './rate-gate';
import { wholeCallFailed, type BulkEntryOutcome, type BulkOutbound } from './bulk-send';

/** One connection as the router uses it. */
export interface DeliveryConnection {
  /** Its `SES_CONNECTIONS` name. */
  readonly name: string;
  /** Its transport (its own SES client and rate gate). */
  readonly transport: MailTransport;
  /**
   * Whether `domain`'s identity is verified for sending in this connection's SES (asked of failover targets only).
   * @throws the provider's error (then the connection is not used for that message).
   */
  verifies(domain: string): Promise<boolean>;
  /** A harmless call to this connection's SES (`GetAccount`). @throws its error. */
  probe(): Promise<unknown>;
}

/** Dependencies of the router. */
export interface ConnectionRouterDeps {
  /** Every connection, the default (the unbound messages') first. */
  connections: readonly DeliveryConnection[];
  health: ConnectionHealth;
  /**
   * The connection name bound to mail from `domain` of `projectId` (null: the first); asked when a message has
   * no `connection`, cached for {@link BINDING_TTL_MS}.
   * @throws the database's error (the message then goes by the first connection's rules, not cached).
   */
  binding?: (projectId: string, domain: string) => Promise<string | null>;
  /** Where the pins of messages whose answer was lost are kept. */
  redis: Redis | Cluster;
  /** `QUEUE_PREFIX`. */
  prefix: string;
  logger: Logger;
  /** Told of each message a connection's SES accepted (its quota's count between two account readings). */
  onSent?: (connection: string) => void;
}

/** How long (ms) a binding read from the database is reused. */
export const BINDING_TTL_MS = 5_000;
/** How long (ms) a verified-identity answer of a failover target is reused (a refusal: a tenth of it). */
const VERIFIED_TTL_MS = 300_000;
/** How long (s) a message whose answer was lost stays pinned to its connection. */
const PIN_TTL_S = 7 * 86_400;
/** Errors by which the request cannot have reached SES: not worth a pin. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** See the module notes. */
export class ConnectionRouter implements MailTransport {
  private readonly byName: Map<string, DeliveryConnection>;
  private readonly bindings = new Map<string, { name: string | null; at: number }>();
  private readonly verified = new Map<string, { ok: boolean; at: number }>();
  /** When this process last saw a connection failing or wrote a pin: pins are looked up until a day after. */
  private incidentAt = 0;
  /** Whether any process of the deployment wrote a pin in the last `PIN_TTL_S` (read from Redis once a second). */
  private pinsActive = { value: false, at: 0 };

  /**
   * Sends a bulk call's entries, each through the connection {@link route} picks for it (the call's entries share
   * a sender, so one call per connection, almost always one), and records each call's answer in its connection's
   * health. A call that failed gives each of its entries the call's error, marked `wholeCall` (pinned to the
   * connection as a `send` whose answer was lost is), so one connection's failure never hides another's accepted
   * entries. Present when every connection's transport sends bulk calls.
   * @returns each entry's outcome in entry order, with the connection it went through.
   * @throws nothing for an SES answer (each entry carries it); the routing's Redis error.
   */
  readonly sendBulk?: (call: BulkOutbound) => Promise<{ outcomes: BulkEntryOutcome[] }>;

  constructor(private readonly deps: ConnectionRouterDeps) {
    if (deps.connections.length === 0) throw new Error('ConnectionRouter needs at least one connection');
    this.byName = new Map(deps.connections.map((c) => [c.name, c]));
    const bulk = (t: MailTransport) => typeof (t as { sendBulk?: unknown }).sendBulk === 'function';
    if (deps.connections.every((c) => bulk(c.transport))) this.sendBulk = (call) => this.bulk(call);
  }

  /** The send rate (emails/s) of `connection` (unset or unknown: the default one) now. */
  sendRate(connection?: string): number | undefined {
    const c = (connection && this.byName.get(connection)) || this.deps.connections[0];
    return c.transport.sendRate?.();
  }

  /** The connection names, the default first. */
  get names(): string[] {
    return this.deps.connections.map((c) => c.name);
  }

  /**
   * The connection `message` goes through now (see the module notes).
   * @throws nothing: a failed lookup falls back to the bound (or first) connection.
   */
  async route(
    message: Pick<OutboundMessage, 'from' | 'connection' | 'projectId' | 'key'>,
  ): Promise<DeliveryConnection> {
    const domain = domainOf(message.from);
    const bound =
      this.byName.get(message.connection ?? (await this.bound(message.projectId, domain)) ?? '') ??
      this.deps.connections[0];
    if (this.deps.connections.length === 1) return bound;
    const { health } = this.deps;
    const boundHealthy = await health.healthy(bound.name);
    if (!boundHealthy) this.incidentAt = Date.now();
    // Pins are looked up after an incident this process saw, or one any other process pinned a message in (its
    // retry may come here, or to this process after a restart): otherwise no lookup, no Redis call per send.
    if (message.key && (Date.now() - this.incidentAt < 86_400_000 || (await this.anyPins()))) {
      const pinned = await logged(
        this.deps.redis.get(this.pinKey(message.key)),
        this.deps.logger,
        'connection pin lookup',
      );
      const to = pinned ? this.byName.get(pinned) : undefined;
      if (to) return to;
    }
    if (boundHealthy) return bound;
    for (const c of this.deps.connections) {
      if (c === bound || !(await health.healthy(c.name))) continue;
      if (await this.verifies(c, domain)) {
        this.deps.logger.debug(
          { bound: bound.name, connection: c.name, domain },
          'failing over to another delivery connection',
        );
        return c;
      }
    }
    return bound;
  }

  /**
   * Sends through {@link route}'s connection and records the answer in its health.
   * @returns the message id and the connection's name.
   * @throws the connection's error (classify it with `classifySendError`).
   */
  async send(message: OutboundMessage): Promise<{ messageId: string; connection: string }> {
    const c = await this.route(message);
    try {
      const { messageId } = await c.transport.send(message);
      this.deps.onSent?.(c.name);
      await this.deps.health.succeeded(c.name);
      return { messageId, connection: c.name };
    } catch (err) {
      // Its gate is saturated: nothing reached SES, nothing to learn about the connection's health.
      if (err instanceof GateBusyError) throw err;
      await this.failed(c, err, message.key ? [message.key] : []);
      throw err;
    }
  }

  private async bulk(call: BulkOutbound): Promise<{ outcomes: BulkEntryOutcome[] }> {
    const groups = new Map<DeliveryConnection, number[]>();
    for (const [i, e] of call.entries.entries()) {
      const c = await this.route({ ...call, key: e.key });
      const group = groups.get(c);
      if (group) group.push(i);
      else groups.set(c, [i]);
    }
    const outcomes = new Array<BulkEntryOutcome>(call.entries.length);
    for (const [c, indexes] of groups) {
      const entries = indexes.map((i) => call.entries[i]);
      let got: BulkEntryOutcome[];
      try {
        got = (await c.transport.sendBulk!({ ...call, connection: c.name, entries })).outcomes;
      } catch (err) {
        got = wholeCallFailed(entries, err);
      }
      // A call split by the transport may have failed in part: each failed part is recorded as a failed call.
      const failedCalls = new Map<Error, string[]>();
      got.forEach((o, k) => {
        if ('messageId' in o) this.deps.onSent?.(c.name);
        else if (o.wholeCall && !(o.error instanceof GateBusyError))
          failedCalls.set(o.error, [...(failedCalls.get(o.error) ?? []), entries[k].key]);
      });
      // SES answered (each entry's own result, accepted or not): the connection works.
      if (got.some((o) => !('error' in o && o.wholeCall))) await this.deps.health.succeeded(c.name);
      for (const [err, keys] of failedCalls) await this.failed(c, err, keys);
      indexes.forEach((i, k) => (outcomes[i] = { ...got[k], connection: c.name }));
    }
    return { outcomes };
  }

  /**
   * Records a failed call in `c`'s health, and pins `keys` to `c` when the answer was lost (SES may have them).
   */
  private async failed(c: DeliveryConnection, err: unknown, keys: readonly string[]): Promise<void> {
    const kind = classifySendError(err);
    if (isConnectionFailure(kind)) {
      this.incidentAt = Date.now();
      const unhealthy = await this.deps.health.failed(c.name);
      if (unhealthy)
        this.deps.logger.warn(
          { connection: c.name, reason: kind.reason },
          'delivery connection unhealthy: its domains fail over',
        );
    }
    const code = (err as { code?: string; name?: string }).code ?? (err as { name?: string }).name ?? '';
    if (kind.kind !== 'unreachable' || NEVER_SENT.has(code) || keys.length === 0 || this.deps.connections.length < 2)
      return;
    // The answer was lost: SES may have the messages. Their retries stay on this connection.
    for (const key of keys)
      await logged(
        this.deps.redis.set(this.pinKey(key), c.name, 'EX', PIN_TTL_S, 'NX'),
        this.deps.logger,
        'connection pin',
      );
    await logged(
      this.deps.redis.set(this.pinsMarkerKey(), String(Date.now()), 'EX', PIN_TTL_S),
      this.deps.logger,
      'connection pins marker',
    );
  }

  /**
   * Probes each unhealthy connection once (its `GetAccount`): any answer that is not a connection failure
   * (success, or a refusal such as AccessDenied) marks it healthy again. One process of the deployment probes a
   * connection per `everyMs` (a Redis `SET NX` with that expiry). Never throws.
   * @returns the names found healthy again.
   */
  async probeUnhealthy(everyMs: number): Promise<string[]> {
    const back: string[] = [];
    for (const c of this.deps.connections) {
      if (await this.deps.health.healthy(c.name)) continue;
      const turn = await logged(
        this.deps.redis.set(`${this.deps.health.key(c.name)}:probe`, '1', 'PX', Math.max(100, everyMs - 50), 'NX'),
        this.deps.logger,
        'connection probe turn',
        'debug',
      );
      if (turn !== 'OK') continue;
      let ok: boolean;
      try {
        await c.probe();
        ok = true;
      } catch (err) {
        ok = !isConnectionFailure(classifySendError(err));
      }
      if (ok) {
        await this.deps.health.succeeded(c.name);
        back.push(c.name);
        this.deps.logger.info({ connection: c.name }, 'delivery connection healthy again: its domains come back');
      }
    }
    return back;
  }

  close(): void {
    for (const t of new Set(this.deps.connections.map((c) => c.transport))) t.close();
  }

  private pinKey(key: string): string {
    return `${this.deps.prefix}:ses-pinned:${key}`;
  }

  /** Set (for the pins' lifetime) whenever a process writes a pin. */
  private pinsMarkerKey(): string {
    return `${this.deps.prefix}:ses-pinned-any`;
  }

  /** Whether the deployment has written a pin in the last `PIN_TTL_S`, read at most once a second. */
  private async anyPins(): Promise<boolean> {
    if (Date.now() - this.pinsActive.at >= 1_000) {
      const marker =
        (await logged(
          this.deps.redis.get(this.pinsMarkerKey()),
          this.deps.logger,
          'connection pins marker lookup',
          'debug',
        )) ?? null;
      this.pinsActive = { value: marker !== null, at: Date.now() };
    }
    return this.pinsActive.value;
  }

  private async bound(projectId: string | undefined, domain: string): Promise<string | null> {
    if (!projectId || !this.deps.binding || this.deps.connections.length === 1) return null;
    const k = `${projectId}|${domain}`;
    const hit = this.bindings.get(k);
    if (hit && Date.now() - hit.at < BINDING_TTL_MS) return hit.name;
    try {
      const name = await this.deps.binding(projectId, domain);
      if (this.bindings.size > 10_000) this.bindings.clear();
      this.bindings.set(k, { name, at: Date.now() });
      return name;
    } catch (err) {
      this.deps.logger.warn(
        { err: (err as Error).message, projectId, domain },
        'delivery connection binding not read; using the last known or the first',
      );
      return hit?.name ?? null;
    }
  }

  private async verifies(c: DeliveryConnection, domain: string): Promise<boolean> {
    const k = `${c.name}|${domain}`;
    const hit = this.verified.get(k);
    if (hit && Date.now() - hit.at < (hit.ok ? VERIFIED_TTL_MS : VERIFIED_TTL_MS / 10)) return hit.ok;
    let ok: boolean;
    try {
      ok = await c.verifies(domain);
    } catch (err) {
      this.deps.logger.warn(
        { err: (err as Error).message, connection: c.name, domain },
        'identity of a failover connection not read',
      );
      return false;
    }
    if (this.verified.size > 10_000) this.verified.clear();
    this.verified.set(k, { ok, at: Date.now() });
    return ok;
  }
}

/** The domain of an address (`a@Example.com` → `example.com`; a display-name form `N <a@b>` too). */
export function domainOf(address: string): string {
  // The last `<…>` closing the text (trailing whitespace aside): found by index, not by a regex (`/<([^>]*)>\s*$/`
  // retries from every `<` and is quadratic on a run of them).
  const trimmed = address.trimEnd();
  const open = trimmed.endsWith('>') ? trimmed.lastIndexOf('<') : -1;
  const bare = open >= 0 ? trimmed.slice(open + 1, -1) : address;
  return bare
    .slice(bare.lastIndexOf('@') + 1)
    .trim()
    .toLowerCase();
}
