export * from './client';
export * from './schema';
export { migrate, ensureDatabase, MIGRATIONS_FOLDER } from './migrate';
export * from './queries/projects';
export * from './queries/contacts';
export * from './queries/templates';
export * from './queries/emails';
export * from './queries/events';
export * from './queries/imports';
export * from './queries/idempotency';
export * from './queries/segment-filter';
export * from './queries/segments';
export * from './queries/campaigns';
export * from './queries/campaign-pause';
export { campaignLaneShare, sendingLiveCampaigns, sentInLast24Hours, sentSinceHour, type LaneShare } from './queries/send-quota';
export { getProjectGuardrails, updateProjectGuardrails, enforceCampaignGuardrail, type GuardrailCheck } from './queries/guardrails';
export {
  projectReputation,
  reputationByProject,
  REPUTATION_WINDOWS,
  type ReputationWindow,
  type ReputationCounts,
  type ReputationWindowCounts,
} from './queries/reputation';
export { retryFailedCampaign, retriedEmailIds, type RetryFailedResult } from './queries/campaign-retry';
export * from './queries/unsubscribe';
export * from './queries/suppressions';
export * from './queries/webhooks';
export * from './queries/feedback';
export * from './queries/workflows';
export * from './queries/workflow-engine';
export { drainWorkflowInbox } from './queries/workflow-inbox';
export * from './queries/domains';
export { storeTestMessage, getTestMessage, pruneTestMessages, TEST_MESSAGE_PRUNE_BATCH, type TestMessageLookup } from './queries/test-messages';
export { importProjectKeys, type ImportKeysResult } from './queries/import-keys';
export {
  importFromPlunk,
  PLUNK_IMPORT_KINDS,
  type PlunkImportKind,
  type PlunkImportOptions,
  type PlunkImportReport,
  type KindTally,
  type UnmappedRow,
} from './plunk-import/run';
export { plunkRowId } from './plunk-import/ids';
