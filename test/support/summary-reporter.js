// Prints, after Jest's own summary, the lines tests sent it (`test/support/summary.ts`: a chaos suite's tally, a
// `NOT RUN:` notice), then one plain closing line, "N passed, N failed".
const { mkdtempSync, readFileSync, rmSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

class SummaryReporter {
  constructor() {
    // Set before Jest starts its workers, so every test process inherits it.
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-summary-'));
    this.file = path.join(this.dir, 'lines.txt');
    process.env.MAILROOM_TEST_SUMMARY_FILE = this.file;
  }

  onRunComplete(_contexts, results) {
    let lines = '';
    try {
      lines = readFileSync(this.file, 'utf8');
    } catch {
      // No test sent a line.
    }
    rmSync(this.dir, { recursive: true, force: true });
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(
      `${lines ? `\n${lines}` : ''}\n${results.numPassedTests} passed, ${results.numFailedTests + results.numRuntimeErrorTestSuites} failed${skipped ? `, ${skipped} skipped` : ''}\n`,
    );
  }
}
module.exports = SummaryReporter;
