/**
 * Unsubscribe tokens for marketing mail (docs/api/overview.md, marketing mail; RFC 8058 one-click unsubscribe).
 *
 * A token names the email it was sent in (so the unsubscribe is attributed to that email and its campaign) and
 * carries an HMAC-SHA256 of it under the project's signing key: `base64url(emailId (16 bytes) ‖ mac (16 bytes))`,
 * 43 characters. The email of a topic (docs/guides/topics.md) carries the topic too, so its one-click unsubscribe
 * leaves that topic only: `base64url(emailId ‖ topicId (16 bytes) ‖ mac)`, 64 characters, the MAC over both. A
 * token never exposes a contact id, and it cannot be forged or pointed at another email or topic.
 *
 * @module
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const MAC_BYTES = 16;
const ID_BYTES = 16;

function mac(emailId: string, key: Buffer, topicId?: string): Buffer {
  const text = topicId ? `unsubscribe:v2:${emailId}:${topicId}` : `unsubscribe:v1:${emailId}`;
  return createHmac('sha256', key).update(text).digest().subarray(0, MAC_BYTES);
}

function uuidBytes(id: string): Buffer {
  return Buffer.from(id.replace(/-/g, ''), 'hex');
}

function uuidText(raw: Buffer): string {
  const hex = raw.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * Makes the token of an email. @param key - the project's signing key (32 bytes). @param topicId - the email's
 * topic, when it has one (the token then unsubscribes from that topic only).
 */
export function createUnsubscribeToken(emailId: string, key: Buffer, topicId?: string | null): string {
  const parts = [uuidBytes(emailId), ...(topicId ? [uuidBytes(topicId)] : []), mac(emailId, key, topicId ?? undefined)];
  return Buffer.concat(parts).toString('base64url');
}

/** What a token claims, before verification. */
export interface UnsubscribeTokenClaim {
  emailId: string;
  /** The topic of a topic email's token. */
  topicId?: string;
}

/** What a token claims (email, and topic), before verification; `undefined` when it is not shaped like a token. */
export function parseUnsubscribeToken(token: string): UnsubscribeTokenClaim | undefined {
  if (token.length !== 43 && token.length !== 64) return undefined;
  if (!/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
  const raw = Buffer.from(token, 'base64url');
  if (raw.length === ID_BYTES + MAC_BYTES) return { emailId: uuidText(raw.subarray(0, ID_BYTES)) };
  if (raw.length === 2 * ID_BYTES + MAC_BYTES)
    return { emailId: uuidText(raw.subarray(0, ID_BYTES)), topicId: uuidText(raw.subarray(ID_BYTES, 2 * ID_BYTES)) };
  return undefined;
}

/** The email id a token claims, before verification; `undefined` when it is not shaped like a token. */
export function unsubscribeTokenEmailId(token: string): string | undefined {
  return parseUnsubscribeToken(token)?.emailId;
}

/** Checks a token's MAC in constant time (over the email, and the topic a topic token carries). */
export function verifyUnsubscribeToken(token: string, emailId: string, key: Buffer): boolean {
  const claim = parseUnsubscribeToken(token);
  if (!claim) return false;
  const raw = Buffer.from(token, 'base64url');
  return timingSafeEqual(raw.subarray(raw.length - MAC_BYTES), mac(emailId, key, claim.topicId));
}

/** The public unsubscribe URL of a token. @param publicUrl - `PUBLIC_URL`, without a trailing slash. */
export function unsubscribeUrl(publicUrl: string, token: string): string {
  return `${publicUrl}/unsubscribe/${token}`;
}
