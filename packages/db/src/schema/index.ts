/**
 * The tables of the schema, one module per resource: what `drizzle(pool, { schema })` and drizzle-kit read. Queries
 * import tables from their own modules (`@mailroom/db/schema/<resource>`).
 *
 * @module
 */
export {
  API_KEY_MODES,
  API_KEY_SCOPES,
  TRACKING_MODES,
  projects,
  apiKeys,
  type ProjectGuardrails,
  type ProjectRetention,
  type ApiKeyMode,
  type ApiKeyScope,
  type TrackingMode,
} from './projects';
export { contacts, contactStats, contactStatDeltas, contactStatsNow } from './contacts';
export { templates, templateVersions, type TemplateType } from './templates';
export { DOMAIN_STATUSES, domains, type DomainStatus } from './domains';
export { EMAIL_STATUSES, attachments, emails, emailEvents, type EmailStatus, type EmailSource } from './emails';
export { events, eventNames, eventNameDeltas, eventNameMonths, eventNamesNow } from './events';
export {
  IMPORT_STATUSES,
  contactImports,
  contactImportChunks,
  contactImportErrors,
  type ImportStatus,
  type ImportFormat,
} from './imports';
export { idempotencyKeys } from './idempotency';
export {
  INBOUND_STATUSES,
  inboundEmails,
  type InboundStatus,
  type InboundVerdicts,
  type InboundAttachmentInfo,
} from './inbound';
export { segments, segmentMembers, type SegmentType } from './segments';
export {
  CAMPAIGN_STATUSES,
  CAMPAIGN_PAUSE_REASONS,
  campaigns,
  type CampaignStatus,
  type CampaignPauseReason,
  type AudienceType,
} from './campaigns';
export { SUPPRESSION_REASONS, suppressions, snsMessages, type SuppressionReason } from './feedback';
export {
  webhookEndpoints,
  WEBHOOK_DELIVERY_STATUSES,
  webhookDeliveries,
  webhookAttempts,
  type WebhookDeliveryStatus,
} from './webhooks';
export {
  workflows,
  workflowSteps,
  workflowTransitions,
  workflowExecutions,
  workflowStepRuns,
  workflowInbox,
} from './workflows';
export {
  NO_CAMPAIGN,
  MARKETING_NO_CAMPAIGN,
  reputationCounts,
  reputationTagCounts,
  campaignEvents,
  testMessages,
} from './deliverability';
export {
  TOPIC_DEFAULTS,
  TOPIC_VISIBILITIES,
  topics,
  contactTopics,
  contactConfirmations,
  type TopicDefault,
  type TopicVisibility,
} from './topics';
