/**
 * Which test files make up each tier (one Jest project each: `jest.config.js`). Every test file belongs to exactly
 * one (`test/house/tiers.test.ts`): list a new pure test under UNIT and a new slow one under SLOW; any other falls
 * into integration or e2e by its directory. Globs are relative to the repository root.
 */
/** Pure tests: no Postgres, Redis, SES emulator or network; no global setup (`TEST_DATABASE_URL` is unset). */
const UNIT = [
  'apps/api/src/http/request-id.test.ts',
  'apps/api/src/http/server-classes.test.ts',
  'packages/campaigns/src/ab-assign.test.ts',
  'packages/campaigns/src/ab-stats.test.ts',
  'packages/campaigns/src/lane.test.ts',
  'packages/campaigns/src/rules.test.ts',
  'packages/audiences/src/filter-schema.test.ts',
  'packages/campaigns/src/guardrails.test.ts',
  'packages/audiences/src/queries/segment-filter.test.ts',
  'packages/audiences/src/segments.test.ts',
  'packages/config/src/config.test.ts',
  'packages/contacts/src/import-reserved-keys.test.ts',
  'packages/contacts/src/imports.test.ts',
  'packages/contacts/src/queries/erase-scrub.test.ts',
  'packages/db/src/queries/like.test.ts',
  'packages/db/src/replicas.test.ts',
  'packages/feedback/src/inbound/receipt.test.ts',
  'packages/feedback/src/sns.test.ts',
  'packages/mail/src/connections.test.ts',
  'packages/mail/src/content-limits.test.ts',
  'packages/mail/src/fallbacks.test.ts',
  'packages/mail/src/headers.test.ts',
  'packages/mail/src/mail.test.ts',
  'packages/mail/src/mail-equivalence.test.ts',
  'packages/mail/src/sender.test.ts',
  'packages/mail/src/template-variables.test.ts',
  'packages/mail/src/templates.test.ts',
  'packages/platform/src/batcher.test.ts',
  'packages/platform/src/json-guard.test.ts',
  'packages/platform/src/reserved-keys.test.ts',
  'packages/platform/src/validation.test.ts',
  'packages/queues/src/catalog.test.ts',
  'packages/sending/src/relay/header-text.test.ts',
  'packages/sending/src/relay/headers.test.ts',
  'packages/sending/src/ses/account.test.ts',
  'packages/sending/src/ses/bulk-send.test.ts',
  'packages/sending/src/ses/quota-guard.test.ts',
  'packages/verify/src/verify.test.ts',
  'packages/webhooks/src/delivery.test.ts',
  'packages/workflows/src/workflows.test.ts',
];

/** Slow: minutes each, or tools beyond the services (Chromium, initdb, kubectl, promtool, Caddy, Compose). */
const SLOW = [
  'test/chaos/**/*.test.ts',
  'test/fuzz/**/*.test.ts',
  'test/deploy/**/*.test.ts',
  'test/api/deploy.test.ts',
  'test/e2e/api-docs-page.test.ts',
  'test/e2e/campaign-ab.test.ts',
  'test/e2e/cluster.test.ts',
  'test/e2e/dashboard.test.ts',
  'test/e2e/dev-postgres.test.ts',
  'test/e2e/fair-share.test.ts',
  'test/e2e/plunk-import.test.ts',
  'test/e2e/preference-center.test.ts',
  'test/e2e/read-replicas.test.ts',
  'test/e2e/scale.test.ts',
  'test/e2e/unsubscribe-pause-browser.test.ts',
];

/** Postgres, Redis and the emulator, one process: routes, package tests that need services, house and docs checks. */
const INTEGRATION = [
  'packages/**/*.test.ts',
  'apps/**/*.test.ts',
  'test/api/**/*.test.ts',
  'test/house/**/*.test.ts',
  'test/docs/**/*.test.ts',
];

/** API → worker → SES emulator, and the clients driving a running API. */
const E2E = ['test/e2e/**/*.test.ts', 'test/compat/**/*.test.ts', 'test/client/**/*.test.ts', 'test/mcp/**/*.test.ts'];

module.exports = { UNIT, SLOW, INTEGRATION, E2E };
