/**
 * Jest's Node environment, with the console held back: what a test writes with `console.*` is kept while it runs
 * and printed only when it fails (with the file's own output outside any test, from `beforeAll`/`afterAll` or
 * module scope, printed when anything in the file failed). A passing run prints only Jest's results and the
 * summary reporter's lines (`test/support/summary.ts` sends a line there, e.g. a chaos suite's tally or a
 * `NOT RUN:` notice).
 *
 * `TEST_CONSOLE=all` prints everything as it comes, as a plain Jest run would.
 *
 * Every project of `jest.config.js` uses it (`testEnvironment`).
 */
const { TestEnvironment } = require('jest-environment-node');

const METHODS = ['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir', 'table'];

class QuietEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    /** Calls made outside a test: `[method, args]`. */
    this.fileCalls = [];
    /** Calls made during the running test, or undefined between tests. */
    this.testCalls = undefined;
    this.fileFailed = false;
    this.installed = false;
    this.passThrough = process.env.TEST_CONSOLE === 'all';
  }

  /** Replaces the methods of the console Jest gave this file (set after the constructor) with recorders. */
  install() {
    this.installed = true;
    const console = this.global.console;
    this.real = {};
    for (const method of METHODS) {
      const real = console[method];
      if (typeof real !== 'function') continue;
      this.real[method] = real.bind(console);
      console[method] = (...args) => (this.testCalls ?? this.fileCalls).push([method, args]);
    }
  }

  flush(calls) {
    for (const [method, args] of calls) this.real[method](...args);
    calls.length = 0;
  }

  handleTestEvent(event, state) {
    if (this.passThrough) return;
    if (!this.installed && this.global.console) this.install();
    switch (event.name) {
      case 'test_start':
        this.testCalls = [];
        break;
      case 'test_done':
        if (event.test.errors.length > 0) {
          this.fileFailed = true;
          this.flush(this.testCalls);
        }
        this.testCalls = undefined;
        break;
      case 'hook_failure':
        this.fileFailed = true;
        break;
      case 'run_finish':
        if (this.fileFailed || state.unhandledErrors.length > 0) this.flush(this.fileCalls);
        break;
      default:
        break;
    }
  }

  async teardown() {
    // Output after the run (an afterAll's late callback) goes where it would have gone had anything failed.
    if (this.installed && this.fileFailed) this.flush(this.fileCalls);
    await super.teardown();
  }
}

module.exports = QuietEnvironment;
