/**
 * Outbound webhooks: the event catalog, endpoint secrets, Standard Webhooks signatures, and an HTTP client that
 * refuses to reach private networks.
 *
 * - Signatures follow the Standard Webhooks specification (https://www.standardwebhooks.com/): headers
 *   `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of
 *   `id.timestamp.body` under the secret), computed by the `standardwebhooks` library.
 * - Targets on private, loopback, link-local and other non-public addresses are refused unless the operator
 *   allows them (`WEBHOOK_ALLOW_PRIVATE_TARGETS`); names are checked after resolution, at connect time, so a DNS
 *   answer cannot point a public name at an internal address.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Webhook } from 'standardwebhooks';

/** Every event type an endpoint can subscribe to, by family. */
export const WEBHOOK_EVENT_TYPES = [
  'email.sent',
  'email.delivered',
  'email.delivery_delayed',
  'email.opened',
  'email.clicked',
  'email.bounced',
  'email.complained',
  'email.failed',
  'email.suppressed',
  'email.received',
  'contact.unsubscribed',
  'contact.suppressed',
  'contact.snoozed',
  'contact.unsnoozed',
  'contact.topic_subscribed',
  'contact.topic_unsubscribed',
  'contact.confirmed',
  'campaign.sending',
  'campaign.paused',
  'campaign.resumed',
  'campaign.sent',
  'campaign.cancelled',
  'campaign.failed',
  'campaign.winner',
  'workflow.started',
  'workflow.completed',
  'workflow.exited',
  'workflow.failed',
  'workflow.cancelled',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Families, subscribable as `<family>.*`; `*` subscribes to everything. */
export const WEBHOOK_EVENT_FAMILIES = ['email', 'contact', 'campaign', 'workflow'] as const;

/** Whether `pattern` is an event type, a family wildcard (`email.*`) or `*`. */
export function isWebhookEventPattern(pattern: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) return (WEBHOOK_EVENT_FAMILIES as readonly string[]).includes(pattern.slice(0, -2));
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(pattern);
}

/** Whether an endpoint subscribed to `patterns` wants `type` (the same rule as the outbox's SQL). */
export function webhookPatternsMatch(patterns: readonly string[], type: string): boolean {
  return patterns.includes('*') || patterns.includes(type) || patterns.includes(`${type.split('.')[0]}.*`);
}

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes (Standard Webhooks' format). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The three Standard Webhooks headers for one attempt. */
export function signWebhook(secret: string, id: string, timestamp: Date, body: string): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, timestamp, body),
  };
}

/** Why a target address was refused. */
export class ForbiddenTargetError extends Error {
  override name = 'ForbiddenTargetError';
}

/** Whether an IP address (v4 or v6, v4-mapped included) is on the public internet (ipaddr.js range `unicast`). */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress())
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() === 'unicast';
}

/**
 * Checks a webhook URL without resolving names: http(s), no credentials, and (unless `allowPrivate`) not a
 * literal private/loopback/link-local address or `localhost`. @returns a problem in plain words, or null.
 */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must use http or https';
  if (u.username || u.password) return 'must not carry credentials';
  if (allowPrivate) return null;
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return 'must not point at a loopback host';
  if (ipaddr.isValid(host) && !isPublicAddress(host))
    return 'must not point at a private, loopback or link-local address';
  return null;
}

/** A `lookup` for sockets that only hands out public addresses (the DNS-rebinding-safe half of the check). */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, results) => {
    if (err) return callback(err, '', 0);
    const list = results;
    const allowed = list.filter((r) => isPublicAddress(r.address));
    if (allowed.length === 0) {
      return callback(new ForbiddenTargetError(`${hostname} resolves only to non-public addresses`), '', 0);
    }
    if ((options as { all?: boolean }).all)
      return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, allowed);
    callback(null, allowed[0].address, allowed[0].family);
  });
};

/** The result of one HTTP attempt. `statusCode` is absent when no answer came (network error, timeout). */
export interface HttpAttempt {
  statusCode?: number;
  /** First 1,024 characters of the answer body. */
  body?: string;
  error?: string;
  durationMs: number;
}

/**
 * POSTs (or sends with `method`) a body and reads at most 1 KiB of the answer. Never throws: failures come back
 * as `error`. No redirects are followed (a redirect is an answer like any other non-2xx).
 *
 * @param timeoutMs - for the whole attempt, connection included (ms).
 * @param allowPrivate - skip the public-address check (operator setting).
 */
export function sendHttp(
  url: string,
  init: { method?: string; headers: Record<string, string>; body: string; timeoutMs: number; allowPrivate: boolean },
): Promise<HttpAttempt> {
  const started = Date.now();
  const done = (r: Omit<HttpAttempt, 'durationMs'>): HttpAttempt => ({ ...r, durationMs: Date.now() - started });
  const problem = webhookUrlProblem(url, init.allowPrivate);
  if (problem) return Promise.resolve(done({ error: `refused: URL ${problem}` }));
  const u = new URL(url);
  const client = u.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    const req = client.request(
      u,
      {
        method: init.method ?? 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'mailroom-webhooks/1',
          ...init.headers,
          'content-length': Buffer.byteLength(init.body),
        },
        ...(init.allowPrivate ? {} : { lookup: publicOnlyLookup }),
        timeout: init.timeoutMs,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < 1024) body += chunk.slice(0, 1024 - body.length);
        });
        res.on('end', () => resolve(done({ statusCode: res.statusCode ?? 0, body })));
        res.on('error', (err) => resolve(done({ statusCode: res.statusCode ?? 0, body, error: err.message })));
      },
    );
    const timer = setTimeout(() => req.destroy(new Error(`timed out after ${init.timeoutMs} ms`)), init.timeoutMs);
    req.on('close', () => clearTimeout(timer));
    req.on('timeout', () => req.destroy(new Error(`timed out after ${init.timeoutMs} ms`)));
    req.on('error', (err) =>
      resolve(done({ error: err instanceof ForbiddenTargetError ? `refused: ${err.message}` : err.message })),
    );
    req.end(init.body);
  });
}
