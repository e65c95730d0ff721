/**
 * The webhooks slice of the runtime configuration: which targets a webhook may reach. (The retry schedule and
 * the attempt timeout are in the queues slice, whose catalog reads them.)
 *
 * @module
 */
import { bool, type Env } from '@mailroom/platform/config-env';

/**
 * Webhook target settings.
 *
 * @process api, worker
 * @group shared
 */
export interface WebhookConfig {
  /**
   * `WEBHOOK_ALLOW_PRIVATE_TARGETS`: allow webhook URLs on private, loopback and link-local addresses (off by
   * default: a tenant must not reach the operator's internal network).
   *
   * @default false
   */
  readonly webhookAllowPrivateTargets: boolean;
}

/**
 * Parses and validates the webhooks slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link WebhookConfig}.
 * @throws `ConfigError` naming the first bad variable.
 */
export function loadWebhookConfig(env: Env): WebhookConfig {
  return Object.freeze({ webhookAllowPrivateTargets: bool(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', false) });
}
