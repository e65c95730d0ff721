/**
 * The mail slice of the runtime configuration: the SES connection, the SES account's figures (or the local
 * provider's), sending-domain identities and their MAIL FROM subdomain.
 *
 * @module
 */
import { ConfigError, int, optional, sesProvider, str, url, type Env } from '@mailroom/platform/config-env';
import { DEFAULT_CONNECTION, parseSesConnections, type SesConnection } from './connections';

/**
 * SES connection, account and sending-domain settings.
 *
 * @process api, worker
 * @group shared
 */
export interface MailConfig {
  /**
   * `SES_REGION`: the AWS region of the SES account (default `us-east-1`).
   *
   * @group required
   */
  readonly sesRegion: string;
  /** `SES_ENDPOINT`: override of the SES endpoint, e.g. the local emulator `http://127.0.0.1:8005`. */
  readonly sesEndpoint: string | undefined;
  /**
   * The SES credentials; when both are unset the AWS default credential chain applies (an instance role…):
   * - `AWS_ACCESS_KEY_ID`: the access key id.
   * - `AWS_SECRET_ACCESS_KEY`: its secret.
   *
   * @group required
   */
  readonly awsCredentials: { readonly accessKeyId: string; readonly secretAccessKey: string } | undefined;
  /**
   * `SES_CONFIGURATION_SET`: the configuration set of transactional mail with open and click tracking, and the
   * fallback of every other set below; its event publishing to SNS is what feeds delivery, bounce, complaint, open
   * and click events back (`POST /webhooks/ses`).
   *
   * @group required
   */
  readonly sesConfigurationSet: string | undefined;
  /**
   * `SES_CONFIGURATION_SET_NO_TRACKING`: the configuration set of mail sent without open and click tracking (a
   * project's `trackingMode`, a send's `tracking: false`): the same SNS event destination without Open and Click.
   * Unset: untracked mail goes through `SES_CONFIGURATION_SET` (tracked).
   *
   * @group shared
   */
  readonly sesConfigurationSetNoTracking: string | undefined;
  /**
   * `SES_CONFIGURATION_SET_MARKETING`: the configuration set of marketing mail (campaigns, MARKETING templates),
   * e.g. on a dedicated IP pool of its own. Unset: `SES_CONFIGURATION_SET`.
   *
   * @group shared
   */
  readonly sesConfigurationSetMarketing: string | undefined;
  /**
   * `SES_CONFIGURATION_SET_MARKETING_NO_TRACKING`: the configuration set of marketing mail without tracking.
   * Unset: `SES_CONFIGURATION_SET_NO_TRACKING`, else `SES_CONFIGURATION_SET_MARKETING`, else `SES_CONFIGURATION_SET`.
   *
   * @group shared
   */
  readonly sesConfigurationSetMarketingNoTracking: string | undefined;
  /**
   * `SES_TIMEOUT_MS`: longest one SES call may take on the wire, connecting included (ms, 100–300000, default
   * 30000). A call cut off by it is "SES unreachable": retried later without spending an attempt. Keep it well
   * under `SEND_LEASE_MS`.
   *
   * @group tuning
   */
  readonly sesTimeoutMs: number;
  /**
   * `SES_MAX_SEND_RATE`: optional cap of the send rate (emails/s across all workers, 1–10000), below the SES
   * account's maximum send rate (read with `GetAccount`). The workers send at `min(account rate, cap)`, never more
   * in any one-second window. Unset: the account's rate (or 14/s until the account has been read).
   *
   * @process worker
   * @group worker
   */
  readonly sesMaxSendRate: number | undefined;
  /**
   * `SES_CONNECTIONS`: further SES delivery connections (accounts or regions), a JSON array of `{ "name", "region",
   * "endpoint"?, "accessKeyId"?, "secretAccessKey"?, "profile"?, "configurationSet"?, "configurationSetNoTracking"?, "configurationSetMarketing"?,
   * "configurationSetMarketingNoTracking"?, "maxSendRate"? }` (a `profile`
   * of the AWS shared config files may assume a role; with neither keys nor a profile the AWS credential chain
   * applies). They come after the implicit connection named `default`, built from `SES_REGION`, `SES_ENDPOINT`,
   * the AWS keys, the `SES_CONFIGURATION_SET*` variables and `SES_MAX_SEND_RATE`. A sending domain, else its project, is bound to
   * one by name (unbound: `default`); each has its own rate gate, quota and health, and fails over to another whose
   * SES has the domain verified (docs/self-hosting/delivery-connections.md).
   *
   * @default unset (only `default`)
   * @group shared
   */
  readonly sesConnections: readonly SesConnection[];
  /**
   * `SES_ACCOUNT_PROVIDER`: where the account's send rate and 24-hour quota come from: `ses` (SES v2 `GetAccount`)
   * or `local` (the `SES_LOCAL_*` figures and this service's own count: the emulator has no account). Default
   * `local` when `SES_ENDPOINT` is set, else `ses`.
   */
  readonly sesAccountProvider: 'ses' | 'local';
  /**
   * `SES_LOCAL_MAX_SEND_RATE`: the local provider's maximum send rate (emails/s); default `SES_MAX_SEND_RATE`, else 14.
   *
   * @process worker
   * @group tuning
   */
  readonly sesLocalMaxSendRate: number;
  /**
   * `SES_LOCAL_MAX_24H_SEND`: the local provider's 24-hour quota (emails, default 50000).
   *
   * @process worker
   * @group tuning
   */
  readonly sesLocalMax24HourSend: number;
  /**
   * `DOMAIN_IDENTITY_PROVIDER`: `ses` (SES v2 email identities, Easy DKIM) or `local` (records checked through DNS
   * by this service: the emulator has no identities). Default `local` when `SES_ENDPOINT` is set, else `ses`.
   */
  readonly domainIdentityProvider: 'ses' | 'local';
  /**
   * `MAIL_FROM_SUBDOMAIN`: the custom MAIL FROM subdomain registered for each sending domain (one DNS label,
   * default `mail` → mail.example.com).
   */
  readonly mailFromSubdomain: string;
  /**
   * `DOMAIN_REFRESH_MS`: how often the worker re-checks pending sending domains (ms, default 60000).
   *
   * @process worker
   * @group tuning
   */
  readonly domainRefreshMs: number;
}

/**
 * Parses and validates the mail slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link MailConfig}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadMailConfig(env: Env): MailConfig {
  const accessKeyId = optional(env, 'AWS_ACCESS_KEY_ID');
  const secretAccessKey = optional(env, 'AWS_SECRET_ACCESS_KEY');
  if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) {
    throw new ConfigError(
      accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID',
      'must be set together with its pair',
    );
  }
  const config: MailConfig = {
    sesRegion: str(env, 'SES_REGION', 'us-east-1'),
    sesEndpoint: url(env, 'SES_ENDPOINT', undefined, ['http:', 'https:']),
    awsCredentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
    sesConfigurationSet: optional(env, 'SES_CONFIGURATION_SET'),
    sesConfigurationSetNoTracking: optional(env, 'SES_CONFIGURATION_SET_NO_TRACKING'),
    sesConfigurationSetMarketing: optional(env, 'SES_CONFIGURATION_SET_MARKETING'),
    sesConfigurationSetMarketingNoTracking: optional(env, 'SES_CONFIGURATION_SET_MARKETING_NO_TRACKING'),
    sesMaxSendRate:
      optional(env, 'SES_MAX_SEND_RATE') === undefined ? undefined : int(env, 'SES_MAX_SEND_RATE', 14, 1, 10000),
    sesAccountProvider: sesProvider(env, 'SES_ACCOUNT_PROVIDER'),
    sesLocalMaxSendRate: int(
      env,
      'SES_LOCAL_MAX_SEND_RATE',
      optional(env, 'SES_MAX_SEND_RATE') === undefined ? 14 : int(env, 'SES_MAX_SEND_RATE', 14, 1, 10000),
      1,
      10000,
    ),
    sesLocalMax24HourSend: int(env, 'SES_LOCAL_MAX_24H_SEND', 50_000, 1, 1_000_000_000),
    sesTimeoutMs: int(env, 'SES_TIMEOUT_MS', 30_000, 100, 300_000),
    domainIdentityProvider: sesProvider(env, 'DOMAIN_IDENTITY_PROVIDER'),
    mailFromSubdomain: str(env, 'MAIL_FROM_SUBDOMAIN', 'mail'),
    domainRefreshMs: int(env, 'DOMAIN_REFRESH_MS', 60_000, 100, 86_400_000),
    sesConnections: [],
  };
  const defaults: SesConnection = Object.freeze({
    name: DEFAULT_CONNECTION,
    region: config.sesRegion,
    endpoint: config.sesEndpoint,
    credentials: config.awsCredentials,
    profile: undefined,
    configurationSet: config.sesConfigurationSet,
    configurationSetNoTracking: config.sesConfigurationSetNoTracking,
    configurationSetMarketing: config.sesConfigurationSetMarketing,
    configurationSetMarketingNoTracking: config.sesConfigurationSetMarketingNoTracking,
    maxSendRate: config.sesMaxSendRate,
  });
  (config as { sesConnections: readonly SesConnection[] }).sesConnections = parseSesConnections(env, defaults);
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(config.mailFromSubdomain)) {
    throw new ConfigError('MAIL_FROM_SUBDOMAIN', 'must be one DNS label (letters, digits, hyphens)');
  }
  return Object.freeze(config);
}
