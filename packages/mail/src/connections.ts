/**
 * Named SES delivery connections: one SES account and region each (credentials or a named AWS profile, which may
 * assume a role), parsed from `SES_CONNECTIONS` (JSON) after the implicit `default` connection built from the
 * single-connection variables (`SES_REGION`, `SES_ENDPOINT`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
 * `SES_CONFIGURATION_SET`, `SES_MAX_SEND_RATE`).
 *
 * @module
 */
import { ConfigError, type Env } from '@mailroom/platform/config-env';

/** The name of the connection built from the single-connection variables. */
export const DEFAULT_CONNECTION = 'default';

/** One SES account and region mail can be delivered through. */
export interface SesConnection {
  /** Unique name (`[a-z0-9][a-z0-9_-]{0,31}`), bound to domains and projects and shown as the `connection` label. */
  readonly name: string;
  /** The AWS region of the SES account (e.g. `eu-west-1`). */
  readonly region: string;
  /** Override of the SES endpoint (the local emulator); unset: the region's. */
  readonly endpoint: string | undefined;
  /** Static credentials; unset: `profile`, else the AWS default chain. */
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string } | undefined;
  /**
   * A named profile of the AWS shared config files (`~/.aws/config`): one with `role_arn` (and `source_profile`
   * or `credential_source`) makes this connection assume that role in the client's account.
   */
  readonly profile: string | undefined;
  /** The SES configuration set passed on every send of this connection (its event publishing feeds events back). */
  readonly configurationSet: string | undefined;
  /** Cap of this connection's send rate (emails/s across all workers), below its account's maximum. */
  readonly maxSendRate: number | undefined;
}

const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const FIELDS = new Set(['name', 'region', 'endpoint', 'accessKeyId', 'secretAccessKey', 'profile', 'configurationSet', 'maxSendRate']);

/**
 * Parses `SES_CONNECTIONS`: a JSON array of objects `{ name, region, endpoint?, accessKeyId?, secretAccessKey?,
 * profile?, configurationSet?, maxSendRate? }`, appended after `defaults` (the implicit `default` connection).
 *
 * @returns every connection, `defaults` first.
 * @throws {@link ConfigError} naming `SES_CONNECTIONS` and the entry's field when an entry is malformed, a name
 *   repeats (or is `default`), or the credentials come without their pair.
 */
export function parseSesConnections(env: Env, defaults: SesConnection): readonly SesConnection[] {
  const raw = env.SES_CONNECTIONS?.trim();
  if (!raw) return Object.freeze([defaults]);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new ConfigError('SES_CONNECTIONS', `must be a JSON array of connections: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new ConfigError('SES_CONNECTIONS', 'must be a JSON array of connections');
  const out: SesConnection[] = [defaults];
  parsed.forEach((entry: unknown, i) => {
    const at = (field: string) => `SES_CONNECTIONS[${i}].${field}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new ConfigError(`SES_CONNECTIONS[${i}]`, 'must be an object');
    const e = entry as Record<string, unknown>;
    for (const k of Object.keys(e)) if (!FIELDS.has(k)) throw new ConfigError(at(k), 'is not a connection field');
    const text = (field: string, required = false): string | undefined => {
      const v = e[field];
      if (v === undefined || v === null || v === '') {
        if (required) throw new ConfigError(at(field), 'is required');
        return undefined;
      }
      if (typeof v !== 'string') throw new ConfigError(at(field), 'must be a string');
      return v.trim();
    };
    const name = text('name', true)!;
    if (!NAME.test(name)) throw new ConfigError(at('name'), 'must be 1–32 lower-case letters, digits, "-" or "_"');
    if (out.some((c) => c.name === name)) throw new ConfigError(at('name'), `"${name}" is already used`);
    const endpoint = text('endpoint');
    if (endpoint !== undefined) {
      let u: URL | undefined;
      try {
        u = new URL(endpoint);
      } catch {
        u = undefined;
      }
      if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw new ConfigError(at('endpoint'), 'must be an http(s) URL');
    }
    const accessKeyId = text('accessKeyId');
    const secretAccessKey = text('secretAccessKey');
    if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) throw new ConfigError(at(accessKeyId ? 'secretAccessKey' : 'accessKeyId'), 'must be set together with its pair');
    const rate = e.maxSendRate;
    if (rate !== undefined && (typeof rate !== 'number' || !Number.isInteger(rate) || rate < 1 || rate > 10000)) {
      throw new ConfigError(at('maxSendRate'), 'must be a whole number from 1 to 10000');
    }
    out.push(
      Object.freeze({
        name,
        region: text('region', true)!,
        endpoint,
        credentials: accessKeyId && secretAccessKey ? Object.freeze({ accessKeyId, secretAccessKey }) : undefined,
        profile: text('profile'),
        configurationSet: text('configurationSet'),
        maxSendRate: rate,
      }),
    );
  });
  return Object.freeze(out);
}

/**
 * The connection `name` names, or the first (the default) when `name` is unset or names none configured.
 */
export function connectionNamed(connections: readonly SesConnection[], name: string | null | undefined): SesConnection {
  return (name ? connections.find((c) => c.name === name) : undefined) ?? connections[0];
}

/** The single-connection settings of `connection`, in the shape the SES clients take. */
export interface ConnectionClientConfig {
  readonly sesRegion: string;
  readonly sesEndpoint: string | undefined;
  readonly awsCredentials: SesConnection['credentials'];
  /** A named profile of the AWS shared config files (may assume a role). */
  readonly sesProfile?: string;
  readonly sesConfigurationSet: string | undefined;
  readonly sesMaxSendRate: number | undefined;
}

/** `connection` as the single-connection settings the SES clients (transport, account, identities) read. */
export function connectionClientConfig(connection: SesConnection): ConnectionClientConfig {
  return {
    sesRegion: connection.region,
    sesEndpoint: connection.endpoint,
    awsCredentials: connection.credentials,
    ...(connection.profile ? { sesProfile: connection.profile } : {}),
    sesConfigurationSet: connection.configurationSet,
    sesMaxSendRate: connection.maxSendRate,
  };
}
