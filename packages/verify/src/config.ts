/**
 * The verify slice of the runtime configuration: the DNS resolvers used for address verification and domains.
 *
 * @module
 */
import { ConfigError, int, list, renamed, type Env } from '@mailroom/platform/config-env';

/**
 * DNS resolver settings.
 *
 * @process api, worker
 * @group tuning
 */
export interface VerifyConfig {
  /** `DNS_SERVERS`: comma-separated `host` or `host:port` resolvers for verification and domains; unset: the system's. */
  readonly dnsServers: readonly string[];
  /** `DNS_TIMEOUT_MS`: one DNS query attempt (ms, 50–30000, default 2000). */
  readonly dnsTimeoutMs: number;
  /** `DNS_TRIES`: attempts per DNS query (1–5, default 2). */
  readonly dnsTries: number;
  /**
   * - `DNS_CACHE_TTL_SECONDS`: how long a domain's DNS answer is cached in Redis (s, default 3600); nonexistent
   *   domains a tenth of it.
   * - `DNS_CACHE_TTL_S`: the former name of `DNS_CACHE_TTL_SECONDS`, still read when that one is not set.
   */
  readonly dnsCacheTtlSeconds: number;
}

/**
 * Parses and validates the verify slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link VerifyConfig}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadVerifyConfig(env: Env): VerifyConfig {
  const config: VerifyConfig = {
    dnsServers: list(env, 'DNS_SERVERS', []),
    dnsTimeoutMs: int(env, 'DNS_TIMEOUT_MS', 2_000, 50, 30_000),
    dnsTries: int(env, 'DNS_TRIES', 2, 1, 5),
    dnsCacheTtlSeconds: int(env, renamed(env, 'DNS_CACHE_TTL_SECONDS', 'DNS_CACHE_TTL_S'), 3_600, 0, 7 * 86_400),
  };
  for (const server of config.dnsServers) {
    if (!/^(\[[0-9a-f:]+\]|[\w.-]+)(:\d{1,5})?$/i.test(server))
      throw new ConfigError('DNS_SERVERS', `must list host or host:port entries, got "${server}"`);
  }
  return Object.freeze(config);
}
