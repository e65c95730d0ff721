/**
 * DNS for verification and sending domains: Node's resolver (c-ares) with short timeouts, pointed at
 * `DNS_SERVERS` when set (tests run a DNS server of their own on loopback), and a Redis cache of each domain's
 * answer (`DNS_CACHE_TTL_SECONDS`; nonexistent domains for a tenth of that; failures are not cached).
 *
 * @module
 */
import { Resolver } from 'node:dns/promises';
import type { Redis } from 'ioredis';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { VerifyConfig } from './config';
import type { DnsLookup, DomainDns } from './verify';

/**
 * A resolver with `DNS_SERVERS` (empty: the system's resolvers), `DNS_TIMEOUT_MS` per attempt and `DNS_TRIES`
 * attempts per query.
 */
export function createResolver(config: Pick<VerifyConfig, 'dnsServers' | 'dnsTimeoutMs' | 'dnsTries'>): Resolver {
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: config.dnsTries });
  if (config.dnsServers.length > 0) resolver.setServers([...config.dnsServers]);
  return resolver;
}

const code = (err: unknown) => (err as { code?: string }).code;

/** Thrown inside a lookup when DNS does not give an answer (timeout, SERVFAIL, refused, unreachable). */
class DnsUnanswered extends Error {
  constructor(readonly kind: 'timeout' | 'failure') {
    super(kind);
  }
}

async function records<T>(query: () => Promise<T[]>): Promise<T[] | 'nxdomain'> {
  try {
    return await query();
  } catch (err) {
    const c = code(err);
    if (c === 'ENODATA') return [];
    if (c === 'ENOTFOUND') return 'nxdomain';
    throw new DnsUnanswered(c === 'ETIMEOUT' ? 'timeout' : 'failure');
  }
}

/** A/AAAA exist for `name`. */
async function hasAddress(resolver: Resolver, name: string): Promise<boolean> {
  const [a, aaaa] = await Promise.all([records(() => resolver.resolve4(name)), records(() => resolver.resolve6(name))]);
  return (Array.isArray(a) && a.length > 0) || (Array.isArray(aaaa) && aaaa.length > 0);
}

/**
 * What DNS says about `domain` (ASCII): MX (a single "." exchange is a null MX, RFC 7505), A/AAAA as implicit MX
 * when there is no MX (RFC 5321 §5.1), A/AAAA of the domain or `www.` for a website. NXDOMAIN means the domain
 * does not exist; a timeout or server failure comes back as `error` rather than a guess.
 */
export async function lookupDomain(resolver: Resolver, domain: string): Promise<DomainDns> {
  const none: DomainDns = { domainExists: false, mx: [], nullMx: false, implicitMx: false, hasWebsite: false };
  try {
    const mx = await records(() => resolver.resolveMx(domain));
    if (mx === 'nxdomain') return none;
    const nullMx = mx.length === 1 && (mx[0].exchange === '' || mx[0].exchange === '.');
    const exchanges = nullMx ? [] : mx.sort((a, b) => a.priority - b.priority).map((m) => m.exchange);
    const [apex, www] = await Promise.all([hasAddress(resolver, domain), hasAddress(resolver, `www.${domain}`)]);
    return {
      domainExists: true,
      mx: exchanges,
      nullMx,
      implicitMx: !nullMx && exchanges.length === 0 && apex,
      hasWebsite: apex || www,
    };
  } catch (err) {
    if (err instanceof DnsUnanswered) return { ...none, error: err.kind };
    throw err;
  }
}

/**
 * A cached {@link DnsLookup}: answers are kept in Redis under `<prefix>:dns:<domain>` for `ttlS` seconds (a
 * nonexistent domain for a tenth of that, at least 60 s); failures are not cached. A Redis failure only skips the
 * cache.
 */
export function cachedDnsLookup(resolver: Resolver, redis: Redis | undefined, prefix: string, ttlS: number): DnsLookup {
  return async (domain) => {
    const key = `${prefix}:dns:${domain}`;
    if (redis) {
      const hit = await redis.get(key).catch(() => null);
      if (hit) return JSON.parse(hit) as DomainDns;
    }
    const answer = await lookupDomain(resolver, domain);
    if (redis && !answer.error) {
      const ttl = answer.domainExists ? ttlS : Math.max(60, Math.floor(ttlS / 10));
      await redis.set(key, JSON.stringify(answer), 'EX', ttl).catch(() => undefined);
    }
    return answer;
  };
}

/**
 * The lookup verification uses: {@link createResolver}'s resolver behind the Redis cache of {@link cachedDnsLookup}
 * (keys under `QUEUE_PREFIX`), or no cache when `DNS_CACHE_TTL_SECONDS` is 0.
 */
export function createDnsLookup(
  config: Pick<VerifyConfig, 'dnsServers' | 'dnsTimeoutMs' | 'dnsTries' | 'dnsCacheTtlSeconds'> &
    Pick<PlatformConfig, 'queuePrefix'>,
  redis: Redis,
): DnsLookup {
  return cachedDnsLookup(
    createResolver(config),
    config.dnsCacheTtlSeconds > 0 ? redis : undefined,
    config.queuePrefix,
    config.dnsCacheTtlSeconds,
  );
}
