/**
 * The SMTP relay (RFC 6409 message submission over nodemailer's `smtp-server`): a client authenticates with a
 * secret key as its password (`AUTH PLAIN` or `LOGIN`, only over TLS unless `SMTP_ALLOW_INSECURE`; the user name is
 * free, Plunk's clients send `plunk`) and submits messages, each accepted through `acceptRelay`: the pipeline of
 * `POST /v1/send`.
 *
 * Replies (see `./replies`):
 * - `AUTH`: 535 for a key that is unknown, malformed, revoked, expired or public; 554 for a disabled project; 454
 *   over the per-IP failed-authentication limit (shared with HTTP) or with Postgres/Redis down.
 * - `MAIL FROM`: 451 over the project's rate limit (the HTTP limit: one message counts as one request); 552 for a
 *   declared `SIZE` over 10 MB.
 * - `RCPT TO`: 553 for an address `/v1/send` would refuse; 452 beyond 100 recipients (the client sends the rest in
 *   another transaction, RFC 5321 §4.5.3.1.10).
 * - end of DATA: 250 once the emails are committed; 552 over 10 MB; 550 for a sender the project (unverified
 *   domain) or the key (other domain) may not use; 554 for an unreadable message; 451 for anything temporary
 *   (Postgres or Redis down, an unexpected error): never 250 without the rows.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import type { Redis } from 'ioredis';
import { AppError, ErrorCode, errorMessage } from '@mailroom/platform/errors';
import type { Logger } from '@mailroom/platform/logger';
import type { Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import type { KeyRecord } from '@mailroom/projects/queries/projects';
import type { Queues } from '@mailroom/queues/create';
import { acceptRelay, relayRecipientProblem, RELAY_LIMITS } from '@mailroom/sending/relay/accept-relay';
import { sendEnqueueBatcher } from '@mailroom/sending/enqueue-batcher';
import { laneConnectionResolver } from '@mailroom/sending/lane-connection';
import { transactionalBatcher } from '@mailroom/sending/write-batcher';
import { AuthCache, resolveKey } from '../http/auth';
import { ipKey, projectRateLimit, type FailureLimiter } from '../http/rate-limit';
import { authReply, badCredentials, dataReply, reply } from './replies';

/** What the relay needs; the caller owns (and closes) these. */
export interface RelayDeps {
  config: Config;
  database: Database;
  redis: Redis;
  queues: Pick<Queues, 'send' | 'webhook'>;
  logger: Logger;
  authCache: AuthCache;
  authFailures: FailureLimiter;
}

/** One listening port of the relay. */
export interface RelayListener {
  kind: 'starttls' | 'tls' | 'plain';
  server: SMTPServer;
  /** The bound port (the configured one, or the one the system chose for 0 in tests). */
  port: number;
}

/** The relay's ports and how to stop them. */
export interface SmtpRelay {
  listeners: RelayListener[];
  /** Stops accepting, lets transactions in flight finish (smtp-server's close), resolves when every port closed. */
  close(): Promise<void>;
}

/** The key a session authenticated with (what `onAuth` handed smtp-server as the session's `user`). */
const keyOf = (session: SMTPServerSession): KeyRecord | undefined => session.user as KeyRecord | undefined;

/**
 * Starts the configured ports: `SMTP_PORT` (STARTTLS), `SMTP_TLS_PORT` (implicit TLS), `SMTP_PLAIN_PORT` (local).
 *
 * @param ports - overrides of the configured ports (tests pass 0 for a free one).
 * @throws {@link AppError}-free `Error`s: a TLS port without `SMTP_TLS_CERT_FILE`/`SMTP_TLS_KEY_FILE` (naming the
 *   variable), an unreadable certificate, a port in use; nothing is left listening then.
 */
export async function startSmtpRelay(
  deps: RelayDeps,
  ports: Partial<Record<RelayListener['kind'], number>> = {},
): Promise<SmtpRelay> {
  const { config } = deps;
  const wanted: { kind: RelayListener['kind']; port: number }[] = [];
  const starttls = ports.starttls ?? config.smtpPort;
  const tls = ports.tls ?? config.smtpTlsPort;
  const plain = ports.plain ?? config.smtpPlainPort;
  if (config.smtpPort !== 0 || ports.starttls !== undefined) wanted.push({ kind: 'starttls', port: starttls });
  if (config.smtpTlsPort !== 0 || ports.tls !== undefined) wanted.push({ kind: 'tls', port: tls });
  if (plain !== undefined && config.smtpAllowInsecure) wanted.push({ kind: 'plain', port: plain });
  let cert: { key: Buffer; cert: Buffer } | undefined;
  if (wanted.some((w) => w.kind !== 'plain')) {
    if (!config.smtpTlsCertFile || !config.smtpTlsKeyFile) {
      throw new Error(
        'Invalid configuration: SMTP_TLS_CERT_FILE and SMTP_TLS_KEY_FILE are required for SMTP_PORT and SMTP_TLS_PORT (or set both ports to 0)',
      );
    }
    cert = { cert: readFileSync(config.smtpTlsCertFile), key: readFileSync(config.smtpTlsKeyFile) };
  }
  const handlers = relayHandlers(deps);
  const listeners: RelayListener[] = [];
  try {
    for (const w of wanted) {
      const server = new SMTPServer({
        ...baseOptions(config),
        ...handlers,
        ...tlsOptions(w.kind, cert, config.smtpAllowInsecure),
      });
      server.on('error', (err) => deps.logger.warn({ err: err.message, port: w.port }, 'smtp connection error'));
      await new Promise<void>((resolve, reject) => {
        server.server.once('error', reject);
        server.listen(w.port, () => {
          server.server.off('error', reject);
          resolve();
        });
      });
      listeners.push({ kind: w.kind, server, port: (server.server.address() as AddressInfo).port });
    }
  } catch (err) {
    await Promise.all(listeners.map((l) => new Promise<void>((resolve) => l.server.close(() => resolve()))));
    throw err;
  }
  deps.logger.info({ ports: listeners.map((l) => ({ kind: l.kind, port: l.port })) }, 'smtp relay listening');
  return {
    listeners,
    close: () =>
      Promise.all(listeners.map((l) => new Promise<void>((resolve) => l.server.close(() => resolve())))).then(
        () => undefined,
      ),
  };
}

function baseOptions(config: Config): SMTPServerOptions {
  return {
    name: config.smtpHostname,
    banner: 'Mailroom SMTP relay',
    size: RELAY_LIMITS.messageBytes,
    authMethods: ['PLAIN', 'LOGIN'],
    // Our replies carry their own RFC 3463 codes (see ./replies).
    hideENHANCEDSTATUSCODES: true,
    hideDSN: true,
    disableReverseLookup: true,
    maxClients: config.smtpMaxClients,
    socketTimeout: config.smtpSocketTimeoutMs,
    logger: false,
  };
}

function tlsOptions(
  kind: RelayListener['kind'],
  cert: { key: Buffer; cert: Buffer } | undefined,
  insecure: boolean,
): SMTPServerOptions {
  if (kind === 'plain') return { secure: false, disabledCommands: ['STARTTLS'], allowInsecureAuth: true };
  return { ...cert, secure: kind === 'tls', allowInsecureAuth: insecure, minVersion: 'TLSv1.2' };
}

/** The session callbacks of every port. */
function relayHandlers(deps: RelayDeps): Pick<SMTPServerOptions, 'onAuth' | 'onMailFrom' | 'onRcptTo' | 'onData'> {
  const { config, database, logger } = deps;
  const limit = projectRateLimit(deps.redis, config.queuePrefix, config.rateLimitPerMinute);
  // Send jobs of concurrent sessions go to Redis in batches, as /v1/send's do.
  const enqueuer = sendEnqueueBatcher(
    {
      config,
      sendQueue: deps.queues.send,
      redis: deps.redis,
      connectionOf: laneConnectionResolver(database.db, config.sesConnections),
    },
    { maxBatch: config.writeBatchSize, maxInFlight: config.writeBatchInFlight },
  );
  // Writes of concurrent messages without a Message-ID of their own go in shared statements, as /v1/send's do.
  const writer = transactionalBatcher(database.db, {
    maxBatch: config.writeBatchSize,
    maxInFlight: config.writeBatchInFlight,
  });
  const ip = (session: SMTPServerSession) => ipKey(session.remoteAddress);

  return {
    onAuth(auth, session, callback) {
      const password = auth.password ?? '';
      resolveKey(database.db, deps.authCache, deps.authFailures, password, ip(session))
        .then((record) => {
          if (record.kind !== 'secret')
            return callback(badCredentials('Public keys (pk_) cannot send: use a secret key (sk_...) as the password'));
          if (record.projectDisabled)
            return callback(authReply(new AppError(ErrorCode.PROJECT_DISABLED, 'This project is disabled')));
          callback(null, { user: record });
        })
        .catch((err: unknown) => {
          if (!(err instanceof AppError)) logger.warn({ err: errorMessage(err) }, 'smtp auth: key lookup failed');
          callback(authReply(err));
        });
    },
    onMailFrom(_address, session, callback) {
      const key = keyOf(session);
      if (!key) return callback(reply(530, '5.7.0', 'Authentication required'));
      limit(key.projectId).then(
        () => callback(),
        (err: unknown) => callback(dataReply(err)),
      );
    },
    onRcptTo(address, session, callback) {
      if (session.envelope.rcptTo.length >= RELAY_LIMITS.recipients) {
        return callback(
          reply(
            452,
            '4.5.3',
            `Too many recipients: at most ${RELAY_LIMITS.recipients} per message, send the rest in another message`,
          ),
        );
      }
      const problem = relayRecipientProblem(address.address);
      if (problem) return callback(reply(553, '5.1.3', `Recipient address refused: ${problem}`));
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        if (!stream.sizeExceeded) chunks.push(chunk);
      });
      stream.on('end', () => {
        if (stream.sizeExceeded)
          return callback(reply(552, '5.3.4', `Message too big: at most ${RELAY_LIMITS.messageBytes} bytes`));
        const key = keyOf(session)!;
        const later: (() => Promise<void>)[] = [];
        const log = logger.child({
          projectId: key.projectId,
          smtpSession: session.id,
          ...(key.mode === 'test' ? { keyMode: 'test' } : {}),
        });
        acceptRelay(
          {
            db: database.db,
            writer,
            config,
            sendQueue: deps.queues.send,
            webhookQueue: deps.queues.webhook,
            log,
            redis: deps.redis,
            enqueuer,
          },
          key,
          session.envelope.rcptTo.map((r) => r.address),
          Buffer.concat(chunks),
          (fn) => later.push(fn),
        )
          .then(async (result) => {
            // The rows are committed: the jobs are enqueued now (never throws; the reconciler covers Redis).
            for (const fn of later) await fn();
            if (result.removedHeaders.length > 0)
              log.info({ headers: result.removedHeaders }, 'smtp: platform headers removed from a relayed message');
            log.info(
              { messageId: result.messageId, emails: result.emails.length, replayed: result.replayed },
              'smtp message accepted',
            );
            callback(null, `2.0.0 Ok: queued as ${result.messageId}${result.replayed ? ' (already accepted)' : ''}`);
          })
          .catch((err: unknown) => {
            const r = dataReply(err);
            (r.responseCode >= 500 ? log.info.bind(log) : log.warn.bind(log))(
              { reply: r.responseCode, err: errorMessage(err) },
              'smtp message refused',
            );
            callback(r);
          });
      });
    },
  };
}
