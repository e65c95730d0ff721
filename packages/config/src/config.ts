/**
 * Runtime configuration, parsed once from environment variables into a typed, frozen object.
 *
 * Every package that reads settings owns a slice (its `config` module: the interface, with each variable's unit
 * and default, and its `load<Name>Config`); this module composes them. Only entry points (API, worker, CLI),
 * tests and benchmarks import it: they call {@link loadConfig} once and pass the result (or the slices a callee
 * asks for) down. Nothing else reads `process.env`. Bad values fail fast with a {@link ConfigError} naming the
 * variable.
 *
 * @module
 */
import { loadAudienceConfig, type AudienceConfig } from '@mailroom/audiences/config';
import { loadContactsConfig, type ContactsConfig } from '@mailroom/contacts/config';
import { loadFeedbackConfig, type FeedbackConfig } from '@mailroom/feedback/config';
import { loadMailConfig, type MailConfig } from '@mailroom/mail/config';
import type { Env } from '@mailroom/platform/config-env';
import { loadPlatformConfig, type PlatformConfig } from '@mailroom/platform/config';
import { loadQueueConfig, type QueueConfig } from '@mailroom/queues/config';
import { loadSendingConfig, type SendingConfig } from '@mailroom/sending/config';
import { loadVerifyConfig, type VerifyConfig } from '@mailroom/verify/config';
import { loadWebhookConfig, type WebhookConfig } from '@mailroom/webhooks/config';
import { loadWorkflowConfig, type WorkflowConfig } from '@mailroom/workflows/config';
import { loadApiConfig, type ApiConfig } from './api-config';
import { loadWorkerConfig, type WorkerConfig } from './worker-config';
import { loadSmtpConfig, type SmtpConfig } from './smtp-config';

/** Typed configuration shared by the API, the worker and the CLI: every slice. */
export type Config = PlatformConfig &
  MailConfig &
  QueueConfig &
  ContactsConfig &
  WebhookConfig &
  VerifyConfig &
  AudienceConfig &
  FeedbackConfig &
  WorkflowConfig &
  SendingConfig &
  ApiConfig &
  WorkerConfig &
  SmtpConfig;

export { ConfigError } from '@mailroom/platform/config-env';
export type { TrustProxy } from '@mailroom/platform/trust-proxy';

/**
 * Parses and validates configuration: every slice, bottom package first.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link Config}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadConfig(env: Env): Config {
  return Object.freeze({
    ...loadPlatformConfig(env),
    ...loadMailConfig(env),
    ...loadQueueConfig(env),
    ...loadContactsConfig(env),
    ...loadWebhookConfig(env),
    ...loadVerifyConfig(env),
    ...loadAudienceConfig(env),
    ...loadFeedbackConfig(env),
    ...loadWorkflowConfig(env),
    ...loadSendingConfig(env),
    ...loadApiConfig(env),
    ...loadWorkerConfig(env),
    ...loadSmtpConfig(env),
  });
}
