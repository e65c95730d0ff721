/**
 * Named SES delivery connections: one SES account and region each (credentials or a named AWS profile, which may
 * assume a role), parsed from `SES_CONNECTIONS` (JSON) after the implicit `default` connection built from the
 * single-connection variables (`SES_REGION`, `SES_ENDPOINT`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
 * `SES_CONFIGURATION_SET` and its stream and tracking variants, `SES_MAX_SEND_RATE`).
 *
 * @module
 */
import { ConfigError, type Env } from '@mailroom/platform/config-env';
import { errorMessage } from '@mailroom/platform/errors';

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
  /**
   * The SES configuration set of this connection's transactional mail with open and click tracking (its event
   * publishing feeds events back); the fallback of every other cell of {@link configurationSetFor}.
   */
  readonly configurationSet: string | undefined;
  /** The set of transactional mail without open and click tracking (no Open/Click event destination). */
  readonly configurationSetNoTracking?: string | undefined;
  /** The set of marketing mail with tracking (its own dedicated IP pool, say). */
  readonly configurationSetMarketing?: string | undefined;
  /** The set of marketing mail without tracking. */
  readonly configurationSetMarketingNoTracking?: string | undefined;
  /** Cap of this connection's send rate (emails/s across all workers), below its account's maximum. */
  readonly maxSendRate: number | undefined;
}

const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const FIELDS = new Set([
  'name',
  'region',
  'endpoint',
  'accessKeyId',
  'secretAccessKey',
  'profile',
  'configurationSet',
  'configurationSetNoTracking',
  'configurationSetMarketing',
  'configurationSetMarketingNoTracking',
  'maxSendRate',
]);

/** The mail streams: transactional (`/v1/send`, TRANSACTIONAL templates) and marketing (campaigns, MARKETING templates). */
export type MailStream = 'transactional' | 'marketing';

/** The configuration-set names of a connection, by stream and tracking. */
export type ConfigurationSets = Pick<
  SesConnection,
  | 'configurationSet'
  | 'configurationSetNoTracking'
  | 'configurationSetMarketing'
  | 'configurationSetMarketingNoTracking'
>;

/**
 * The SES configuration set of mail of `stream`, with or without open and click tracking, on a connection: the
 * cell's own set, else the nearest configured one. Not tracking weighs more than the stream (a promise to the
 * recipient, where the stream is a matter of IP pools):
 *
 * | stream | tracking | set (first configured) |
 * |---|---|---|
 * | transactional | on | `configurationSet` |
 * | transactional | off | `configurationSetNoTracking`, `configurationSet` |
 * | marketing | on | `configurationSetMarketing`, `configurationSet` |
 * | marketing | off | `configurationSetMarketingNoTracking`, `configurationSetNoTracking`, `configurationSetMarketing`, `configurationSet` |
 *
 * @returns the set name, or undefined when the connection has none (mail goes without a configuration set).
 */
export function configurationSetFor(
  sets: ConfigurationSets,
  stream: MailStream,
  tracking: boolean,
): string | undefined {
  if (stream === 'marketing') {
    return tracking
      ? (sets.configurationSetMarketing ?? sets.configurationSet)
      : (sets.configurationSetMarketingNoTracking ??
          sets.configurationSetNoTracking ??
          sets.configurationSetMarketing ??
          sets.configurationSet);
  }
  return tracking ? sets.configurationSet : (sets.configurationSetNoTracking ?? sets.configurationSet);
}

/**
 * Parses `SES_CONNECTIONS`: a JSON array of objects `{ name, region, endpoint?, accessKeyId?, secretAccessKey?,
 * profile?, configurationSet?, configurationSetNoTracking?, configurationSetMarketing?,
 * configurationSetMarketingNoTracking?, maxSendRate? }`, appended after `defaults` (the implicit `default` connection).
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
    throw new ConfigError('SES_CONNECTIONS', `must be a JSON array of connections: ${errorMessage(err)}`);
  }
  if (!Array.isArray(parsed)) throw new ConfigError('SES_CONNECTIONS', 'must be a JSON array of connections');
  const out: SesConnection[] = [defaults];
  parsed.forEach((entry: unknown, i) => {
    const at = (field: string) => `SES_CONNECTIONS[${i}].${field}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      throw new ConfigError(`SES_CONNECTIONS[${i}]`, 'must be an object');
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
      if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:'))
        throw new ConfigError(at('endpoint'), 'must be an http(s) URL');
    }
    const accessKeyId = text('accessKeyId');
    const secretAccessKey = text('secretAccessKey');
    if (Boolean(accessKeyId) !== Boolean(secretAccessKey))
      throw new ConfigError(at(accessKeyId ? 'secretAccessKey' : 'accessKeyId'), 'must be set together with its pair');
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
        configurationSetNoTracking: text('configurationSetNoTracking'),
        configurationSetMarketing: text('configurationSetMarketing'),
        configurationSetMarketingNoTracking: text('configurationSetMarketingNoTracking'),
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
  /** The other cells of the stream × tracking matrix ({@link configurationSetFor}). */
  readonly sesConfigurationSets: ConfigurationSets;
  /** The connection's name (the transport names the sets it made for custom tracking domains with it). */
  readonly sesConnectionName: string;
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
    sesConfigurationSets: {
      configurationSet: connection.configurationSet,
      configurationSetNoTracking: connection.configurationSetNoTracking,
      configurationSetMarketing: connection.configurationSetMarketing,
      configurationSetMarketingNoTracking: connection.configurationSetMarketingNoTracking,
    },
    sesConnectionName: connection.name,
    sesMaxSendRate: connection.maxSendRate,
  };
}
