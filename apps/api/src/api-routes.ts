/**
 * Every declared route of the API, in mounting order, and what the OpenAPI document needs besides them (the
 * hand-described paths, the version). `createApp` mounts these; `npm run docs:generate` documents the same list.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { AppDeps } from './http/context';
import type { AnyRoute } from './http/route';
import { adminRoutes } from './routes/admin';
import { adminKeyRoutes } from './routes/admin-keys';
import { adminGuardrailRoutes } from './routes/admin-guardrails';
import { adminRetentionRoutes } from './routes/admin-retention';
import { adminConnectionRoutes } from './routes/admin-connections';
import { adminTrackingRoutes } from './routes/admin-tracking';
import { reputationRoutes } from './routes/reputation';
import { contactRoutes } from './routes/contacts';
import { topicRoutes } from './routes/topics';
import { eventRoutes } from './routes/events';
import { importRoutes } from './routes/imports';
import { emailRoutes } from './routes/emails';
import { emailScheduleRoutes } from './routes/email-schedule';
import { sendRoutes } from './routes/send';
import { sendBatchRoutes } from './routes/send-batch';
import { templateRoutes } from './routes/templates';
import { templateVersionRoutes } from './routes/template-versions';
import { templateRenderRoutes } from './routes/template-render';
import { emailRawOpenApiPaths } from './routes/email-raw';
import { segmentRoutes } from './routes/segments';
import { campaignRoutes } from './routes/campaigns';
import { campaignGuardrailRoutes } from './routes/campaign-guardrails';
import { campaignRetryRoutes } from './routes/campaign-retry';
import { campaignAbRoutes } from './routes/campaign-ab';
import { unsubscribeOpenApiPaths } from './routes/unsubscribe';
import { confirmOpenApiPaths } from './routes/confirm';
import { sesWebhookOpenApiPaths } from './routes/ses-webhook';
import { suppressionRoutes } from './routes/suppressions';
import { webhookRoutes } from './routes/webhooks';
import { workflowRoutes } from './routes/workflows';
import { workflowGraphRoutes } from './routes/workflow-graph';
import { workflowExecutionRoutes } from './routes/workflow-executions';
import { verifyRoutes } from './routes/verify';
import { domainRoutes } from './routes/domains';
import { inboundRawOpenApiPaths, inboundRoutes } from './routes/inbound';

/**
 * The declared routes. Building them only captures `deps` (no connection is made, no query run).
 *
 * @param onKeysChange - called after an admin route changed keys or a project's state (drops cached lookups).
 */
export function apiRoutes(deps: AppDeps, onKeysChange: () => void): AnyRoute[] {
  return [
    ...sendRoutes(deps),
    ...sendBatchRoutes(deps),
    ...verifyRoutes(deps),
    ...eventRoutes(deps),
    ...emailRoutes(deps),
    ...emailScheduleRoutes(deps),
    // Before `/contacts/:id`, whose pattern would also match `/contacts/import`.
    ...importRoutes(deps),
    ...contactRoutes(deps),
    ...topicRoutes(deps),
    ...templateRoutes(deps),
    ...templateVersionRoutes(deps),
    ...templateRenderRoutes(deps),
    ...segmentRoutes(deps),
    ...campaignRoutes(deps),
    ...campaignGuardrailRoutes(deps),
    ...campaignRetryRoutes(deps),
    ...campaignAbRoutes(deps),
    ...reputationRoutes(deps),
    ...suppressionRoutes(deps),
    ...webhookRoutes(deps),
    ...workflowRoutes(deps),
    ...workflowGraphRoutes(deps),
    ...workflowExecutionRoutes(deps),
    ...domainRoutes(deps),
    ...inboundRoutes(deps),
    ...adminRoutes(deps, onKeysChange),
    ...adminKeyRoutes(deps, onKeysChange),
    ...adminGuardrailRoutes(deps),
    ...adminRetentionRoutes(deps),
    ...adminConnectionRoutes(deps),
    ...adminTrackingRoutes(deps),
  ];
}

/** OpenAPI paths of the routes mounted by hand (they answer HTML or `message/rfc822`, or read their own body). */
export const HAND_DESCRIBED_PATHS: Record<string, Record<string, unknown>> = {
  ...emailRawOpenApiPaths,
  ...unsubscribeOpenApiPaths,
  ...confirmOpenApiPaths,
  ...sesWebhookOpenApiPaths,
  ...inboundRawOpenApiPaths,
};

/** The product's version (`version` of the root package.json; the same path from `src/` under tsx and `dist/`). */
export function apiVersion(): string {
  return (
    JSON.parse(readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string }
  ).version;
}
