/**
 * A vitest reporter that writes the run's unhandled errors (errors thrown outside any test: an
 * 'error' event nobody listened for, a rejection nobody awaited) to a JSON file beside the run's
 * JSON report. vitest's JSON reporter leaves them out: such a run exits 1 with every test passed,
 * and CI's tail then said "2650 passed, 1 failed (exited 1)" without naming anything. With this
 * file vitest-report.mjs counts each error as a failure and names it in the closing summary.
 *
 * The path comes from DOCKET_UNHANDLED_ERRORS_FILE (run-tests.mjs and run-node-lines.mjs set it);
 * without it the reporter writes nothing.
 */
import { writeFileSync } from 'node:fs';

/** How many stack lines each error keeps: enough to find the code, short enough for a CI tail. */
const STACK_LINES = 12;

export default class UnhandledErrorsReporter {
  onTestRunEnd(_testModules, unhandledErrors) {
    const path = process.env.DOCKET_UNHANDLED_ERRORS_FILE;
    if (!path) return;
    writeFileSync(path, JSON.stringify({ unhandledErrors: (unhandledErrors ?? []).map(describeError) }, null, 2));
  }
}

/**
 * vitest tags an unhandled error with the test file (and test) that was running when it surfaced;
 * the error may still come from another file's leftovers, as vitest's own message warns.
 *
 * @param {any} error
 */
function describeError(error) {
  const message = String(error?.message ?? error);
  return {
    name: String(error?.name ?? 'Error'),
    message,
    stack: String(error?.stack ?? '')
      .split('\n')
      .slice(0, STACK_LINES)
      .join('\n'),
    testFile: typeof error?.VITEST_TEST_PATH === 'string' ? error.VITEST_TEST_PATH : undefined,
    testName: typeof error?.VITEST_TEST_NAME === 'string' ? error.VITEST_TEST_NAME : undefined,
    afterTeardown: error?.VITEST_AFTER_ENV_TEARDOWN === true || undefined,
  };
}
