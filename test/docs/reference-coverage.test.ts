/**
 * The guides name everything the code accepts: every operator, unit and email activity of the filter language in
 * docs/guides/segments.md, and every workflow step type, duration unit and execution status in
 * docs/guides/workflows.md. A new operator or step type without documentation fails here.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { EMAIL_ACTIVITIES, FILTER_OPERATORS, FILTER_UNITS } from '@mailroom/audiences/segments';
import { EXECUTION_STATUSES, STEP_RUN_STATUSES, WORKFLOW_STEP_TYPES } from '@mailroom/db/schema/workflow-states';
import { DURATION_UNITS } from '@mailroom/workflows/workflows';
import { ROOT } from './snippets';

const page = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/** The names of `names` that the page does not show as inline code. */
function missing(text: string, names: readonly string[], format: (n: string) => string = (n) => n): string[] {
  return names.filter((n) => !text.includes('`' + format(n) + '`'));
}

test('the segments guide names every filter operator, unit and email activity', () => {
  const text = page('docs/guides/segments.md');
  expect(missing(text, FILTER_OPERATORS)).toEqual([]);
  expect(missing(text, FILTER_UNITS)).toEqual([]);
  expect(missing(text, EMAIL_ACTIVITIES, (a) => `email.${a}`)).toEqual([]);
});

test('the workflows guide names every step type, duration unit and status', () => {
  const text = page('docs/guides/workflows.md');
  expect(missing(text, WORKFLOW_STEP_TYPES)).toEqual([]);
  expect(missing(text, DURATION_UNITS)).toEqual([]);
  expect(missing(text, EXECUTION_STATUSES)).toEqual([]);
  expect(missing(text, STEP_RUN_STATUSES)).toEqual([]);
});
