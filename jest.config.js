/**
 * Four tiers, one Jest project each (CONTRIBUTING.md, "Test tiers"): `npm run test:<tier>` runs one
 * (`jest --selectProjects <tier>`), a bare `jest` all four. Every test file belongs to exactly one tier
 * (`test/house/tiers.test.ts`); `test/support/tiers.js` lists them.
 *
 * The service tiers share one global setup (Jest runs a setup module once per run, and only when a test of a
 * project naming it runs): a unit-only run starts no database, Redis check or SES emulator.
 */

const path = require('node:path');
const { UNIT, SLOW, INTEGRATION, E2E } = require('./test/support/tiers');

const rooted = (globs) => globs.map((g) => `<rootDir>/${g}`);
// Jest puts the root in for `<rootDir>` only at the start of a pattern: a negation names it itself.
const except = (globs) => globs.map((g) => `!${path.join(__dirname, g)}`);

/** What every tier shares. */
const base = {
  rootDir: __dirname,
  testEnvironment: '<rootDir>/test/support/quiet-environment.js',
  roots: ['<rootDir>/packages', '<rootDir>/apps', '<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  moduleNameMapper: {
    // `@mailroom/<package>/<module>` → that package's source (tsconfig.json `paths` says the same to tsc).
    '^@mailroom/([^/]+)/(.*)$': '<rootDir>/packages/$1/src/$2',
  },
  modulePathIgnorePatterns: ['<rootDir>/.*/dist/'],
  setupFilesAfterEnv: ['<rootDir>/test/support/one-query-per-client.ts'],
  testTimeout: 60_000,
};

/** The per-run database, Redis check, SES emulator and recording proxy (`test/support/global-setup.ts`). */
const services = {
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};

/** @type {import('jest').Config} */
module.exports = {
  testTimeout: 60_000,
  maxWorkers: 2,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  projects: [
    { ...base, displayName: 'unit', testMatch: rooted(UNIT) },
    {
      ...base,
      ...services,
      displayName: 'integration',
      testMatch: [...rooted(INTEGRATION), ...except(UNIT), ...except(SLOW)],
    },
    { ...base, ...services, displayName: 'e2e', testMatch: [...rooted(E2E), ...except(SLOW)] },
    { ...base, ...services, displayName: 'slow', testMatch: rooted(SLOW) },
  ],
};
