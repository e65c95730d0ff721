// Prints one plain closing line, "N passed, N failed", after Jest's own summary.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(
      `\n${results.numPassedTests} passed, ${results.numFailedTests + results.numRuntimeErrorTestSuites} failed${skipped ? `, ${skipped} skipped` : ''}\n`,
    );
  }
}
module.exports = SummaryReporter;
