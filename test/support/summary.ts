/**
 * A line for the end of the run: what the summary reporter (`summary-reporter.js`) prints after Jest's results,
 * pass or fail, while the console of a passing test stays quiet (`quiet-environment.js`). For what a reader of
 * every run should see: a chaos suite's tally of what it survived, a `NOT RUN:` notice naming a missing tool.
 */
import { appendFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Sends `line` to the summary, prefixed with the test file's name. Without the summary reporter (a run with other
 * reporters) it goes to stderr.
 */
export function toSummary(line: string): void {
  const file = process.env.MAILROOM_TEST_SUMMARY_FILE;
  const testPath = expect.getState().testPath;
  const text = `${testPath ? `${path.relative(process.cwd(), testPath)}: ` : ''}${line}\n`;
  if (file) appendFileSync(file, text);
  else process.stderr.write(text);
}
