/**
 * Unsubscribe tokens for marketing mail (docs/api/overview.md, marketing mail; RFC 8058 one-click unsubscribe).
 *
 * A token names the email it was sent in (so the unsubscribe is attributed to that email and its campaign) and
 * carries an HMAC-SHA256 of it under the project's signing key: `base64url(emailId (16 bytes) ‖ mac (16 bytes))`,
 * 43 characters. It never exposes a contact id, and it cannot be forged or pointed at another email.
 *
 * @module
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const MAC_BYTES = 16;

function mac(emailId: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(`unsubscribe:v1:${emailId}`).digest().subarray(0, MAC_BYTES);
}

/** Makes the token of an email. @param key - the project's signing key (32 bytes). */
export function createUnsubscribeToken(emailId: string, key: Buffer): string {
  const id = Buffer.from(emailId.replace(/-/g, ''), 'hex');
  return Buffer.concat([id, mac(emailId, key)]).toString('base64url');
}

/** The email id a token claims, before verification; `undefined` when it is not shaped like a token. */
export function unsubscribeTokenEmailId(token: string): string | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined;
  const raw = Buffer.from(token, 'base64url');
  if (raw.length !== 16 + MAC_BYTES) return undefined;
  const hex = raw.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Checks a token's MAC in constant time. */
export function verifyUnsubscribeToken(token: string, emailId: string, key: Buffer): boolean {
  const raw = Buffer.from(token, 'base64url');
  if (raw.length !== 16 + MAC_BYTES) return false;
  return timingSafeEqual(raw.subarray(16), mac(emailId, key));
}

/** The public unsubscribe URL of a token. @param publicUrl - `PUBLIC_URL`, without a trailing slash. */
export function unsubscribeUrl(publicUrl: string, token: string): string {
  return `${publicUrl}/unsubscribe/${token}`;
}
