/**
 * `TRUST_PROXY`: which proxies in front of the API are trusted to say who the client is (`X-Forwarded-For`), in
 * the forms Express's `trust proxy` setting takes (expressjs.com "Express behind proxies").
 *
 * @module
 */
import { isIP, isIPv4 } from 'node:net';

/**
 * A `trust proxy` value as Express takes it (expressjs.com "Express behind proxies"): a boolean, a hop count, or a
 * list of trusted proxy addresses, CIDR subnets and the names `loopback`, `linklocal`, `uniquelocal`.
 */
export type TrustProxy = boolean | number | readonly string[];

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** One `TRUST_PROXY` list entry: a name, an IPv4/IPv6 address, `address/prefix`, or IPv4 `address/netmask`. */
function validProxyEntry(entry: string): boolean {
  if (PROXY_NAMES.has(entry)) return true;
  const [addr, range, ...rest] = entry.split('/');
  const family = isIP(addr ?? '');
  if (!family || rest.length > 0) return false;
  if (range === undefined) return true;
  if (/^\d{1,3}$/.test(range)) return Number(range) <= (family === 4 ? 32 : 128);
  return family === 4 && isIPv4(range);
}

/**
 * Parses a `TRUST_PROXY` value: unset or `false` (the TCP peer is the client), `true`, a hop count (at most 100), or
 * a comma-separated list of addresses, CIDRs (IPv4 netmask form too) and `loopback`/`linklocal`/`uniquelocal`.
 *
 * @returns the value for Express, or why it is malformed.
 */
export function parseTrustProxy(
  raw: string | undefined,
): { ok: true; value: TrustProxy } | { ok: false; reason: string } {
  if (raw === undefined) return { ok: true, value: false };
  const lower = raw.toLowerCase();
  if (lower === 'false') return { ok: true, value: false };
  if (lower === 'true') return { ok: true, value: true };
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    return hops > 100 ? { ok: false, reason: `hop count must be at most 100, got ${hops}` } : { ok: true, value: hops };
  }
  const entries = raw
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  const bad = entries.find((entry) => !validProxyEntry(entry.toLowerCase()));
  if (bad !== undefined) {
    return {
      ok: false,
      reason: `must be true, false, a hop count, or addresses/CIDRs/loopback/linklocal/uniquelocal separated by commas, got "${bad}"`,
    };
  }
  return {
    ok: true,
    value: Object.freeze(entries.map((e) => (PROXY_NAMES.has(e.toLowerCase()) ? e.toLowerCase() : e))),
  };
}
