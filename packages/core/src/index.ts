export * from './workflow-states';
export * from './domain-record';
export * from './import-format';
export * from './webhook-delivery-ref';
export * from './data-patch';
export * from './guardrail-defaults';
export * from './config';
export * from './errors';
export * from './logger';
export * from './validation';
export * from './json-guard';
export * from './ids';
export * from './address';
export * from './keys';
export * from './templates';
export { templateVariables, missingVariables, type TemplateVariable } from './template-variables';
export * from './queues';
export * from './mail';
export * from './process';
export * from './contacts';
export * from './imports';
export * from './segments';
export * from './unsubscribe';
export * from './sns';
export * from './ses-events';
export * from './webhooks';
export * from './workflows';
export * from './verify';
export * from './dns';
export * from './identities';
export {
  createAccountProvider,
  effectiveSendRate,
  FALLBACK_SEND_RATE,
  LocalAccountProvider,
  quotaState,
  SesAccountProvider,
  type AccountProvider,
  type QuotaState,
  type SesAccount,
} from './ses-account';
export { createSesClient } from './ses-client';
export { demotedPriority, lanePriorities, MAX_DEMOTION, type SharedLane } from './send-lanes';
export type { SendRateConfig } from './config-send-rate';
export {
  SES_REVIEW_LEVELS,
  GUARDRAIL_FIELDS,
  effectiveGuardrails,
  judgeCampaign,
  outcomesSince,
  sesRates,
  validGuardrailValue,
  type GuardrailField,
  type GuardrailOverrides,
  type GuardrailDetails,
  type GuardrailVerdict,
  type OutcomeCounts,
} from './guardrails';
