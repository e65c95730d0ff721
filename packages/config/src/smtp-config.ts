/**
 * The SMTP relay's slice of the runtime configuration (`npm run start:smtp`; only that process listens). Ports are
 * RFC 8314's: 465 with implicit TLS, 587 with STARTTLS (RFC 3207); a plain port (25, 2525) only where
 * `SMTP_ALLOW_INSECURE` says it is a local set-up.
 *
 * @module
 */
import { bool, ConfigError, int, optional, type Env } from '@mailroom/platform/config-env';

/**
 * SMTP relay settings.
 *
 * @process smtp
 * @group smtp
 */
export interface SmtpConfig {
  /** `SMTP_PORT`: message submission with STARTTLS (RFC 6409, RFC 3207); 0 = off (0–65535, default 587). */
  readonly smtpPort: number;
  /** `SMTP_TLS_PORT`: message submission over implicit TLS (RFC 8314 §3.3); 0 = off (0–65535, default 465). */
  readonly smtpTlsPort: number;
  /**
   * `SMTP_PLAIN_PORT`: a port with neither TLS nor STARTTLS, for local use only (e.g. 2525); requires
   * `SMTP_ALLOW_INSECURE`. Unset: off.
   */
  readonly smtpPlainPort: number | undefined;
  /**
   * `SMTP_ALLOW_INSECURE`: local set-ups only (default false): allows `SMTP_PLAIN_PORT`, and `AUTH` before TLS on
   * every port. Never in production: the password is a secret key.
   */
  readonly smtpAllowInsecure: boolean;
  /** `SMTP_TLS_CERT_FILE`: PEM certificate chain of the TLS ports (read at start); required unless both TLS ports are 0. */
  readonly smtpTlsCertFile: string | undefined;
  /** `SMTP_TLS_KEY_FILE`: PEM private key of `SMTP_TLS_CERT_FILE`. */
  readonly smtpTlsKeyFile: string | undefined;
  /** `SMTP_HOSTNAME`: the name in the greeting and EHLO reply (default: the host's name). */
  readonly smtpHostname: string | undefined;
  /** `SMTP_MAX_CLIENTS`: most connections at once per port (1–100000, default 1000); more are refused with 421. */
  readonly smtpMaxClients: number;
  /** `SMTP_SOCKET_TIMEOUT_MS`: an idle connection is closed after this long (ms, 1000–3600000, default 60000). */
  readonly smtpSocketTimeoutMs: number;
}

/**
 * Parses the SMTP slice.
 *
 * @throws {@link ConfigError} naming the variable: a bad number, `SMTP_PLAIN_PORT` without `SMTP_ALLOW_INSECURE`,
 *   or only one of the certificate and key files.
 */
export function loadSmtpConfig(env: Env): SmtpConfig {
  const plain = optional(env, 'SMTP_PLAIN_PORT');
  const smtpAllowInsecure = bool(env, 'SMTP_ALLOW_INSECURE', false);
  const smtpPlainPort = plain === undefined ? undefined : int(env, 'SMTP_PLAIN_PORT', 0, 0, 65535);
  if (smtpPlainPort !== undefined && !smtpAllowInsecure) {
    throw new ConfigError(
      'SMTP_PLAIN_PORT',
      'needs SMTP_ALLOW_INSECURE=true (a port without TLS is for local use only)',
    );
  }
  const smtpTlsCertFile = optional(env, 'SMTP_TLS_CERT_FILE');
  const smtpTlsKeyFile = optional(env, 'SMTP_TLS_KEY_FILE');
  if ((smtpTlsCertFile === undefined) !== (smtpTlsKeyFile === undefined)) {
    throw new ConfigError(
      smtpTlsCertFile ? 'SMTP_TLS_KEY_FILE' : 'SMTP_TLS_CERT_FILE',
      'must be set together with its pair (certificate and key files)',
    );
  }
  return Object.freeze({
    smtpPort: int(env, 'SMTP_PORT', 587, 0, 65535),
    smtpTlsPort: int(env, 'SMTP_TLS_PORT', 465, 0, 65535),
    smtpPlainPort,
    smtpAllowInsecure,
    smtpTlsCertFile,
    smtpTlsKeyFile,
    smtpHostname: optional(env, 'SMTP_HOSTNAME'),
    smtpMaxClients: int(env, 'SMTP_MAX_CLIENTS', 1000, 1, 100_000),
    smtpSocketTimeoutMs: int(env, 'SMTP_SOCKET_TIMEOUT_MS', 60_000, 1_000, 3_600_000),
  });
}
