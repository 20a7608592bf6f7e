/**
 * Reads a vitest JSON report into the counts CI's closing line is made of. Shared by
 * run-tests.mjs (the main suite), run-node-lines.mjs (the other Node lines) and ci-summary.mjs
 * (the one closing line of .ci/run), so every run is counted the same way.
 */
import { existsSync, readFileSync } from 'node:fs';

/**
 * Counts of one vitest run. A missing or unreadable report counts as one failure: the run broke
 * before it could say what happened. A file that failed to import has no failing test, yet the run
 * is broken, so each such file counts as a failure too.
 *
 * @param {string} path the JSON report vitest wrote (`--outputFile.json=…`)
 * @returns {{ passed: number, failed: number, skipped: number, brokenFiles: { name: string, message: string }[], failedTests: string[], problem?: string }}
 */
export function readVitestReport(path) {
  if (!existsSync(path))
    return { passed: 0, failed: 1, skipped: 0, brokenFiles: [], failedTests: [], problem: `no report at ${path}` };
  let result;
  try {
    result = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    return {
      passed: 0,
      failed: 1,
      skipped: 0,
      brokenFiles: [],
      failedTests: [],
      problem: `unreadable report ${path}: ${error}`,
    };
  }
  // A file that failed with no failing test broke outside its tests: it did not load, or a hook
  // (beforeAll) failed and its tests were reported skipped. Either way it counts as a failure.
  const brokenFiles = (result.testResults ?? [])
    .filter(
      (file) => file.status === 'failed' && !(file.assertionResults ?? []).some((test) => test.status === 'failed'),
    )
    .map((file) => ({ name: file.name, message: file.message ?? '' }));
  // Named so that CI's log says which test failed even when only its tail is kept.
  const failedTests = (result.testResults ?? []).flatMap((file) =>
    (file.assertionResults ?? [])
      .filter((test) => test.status === 'failed')
      .map((test) => `${relativeName(file.name)} > ${test.fullName ?? test.title}`),
  );
  // Errors outside any test fail the run (vitest exits 1) yet appear in no test result: each one
  // counts as a failure and is named, so CI's tail says what broke (unhandled-errors-reporter.mjs).
  const unhandledErrors = [...(result.unhandledErrors ?? []), ...readUnhandledErrors(path)];
  failedTests.push(...unhandledErrors.map(unhandledErrorName));
  return {
    passed: result.numPassedTests ?? 0,
    failed: (result.numFailedTests ?? 0) + brokenFiles.length + unhandledErrors.length,
    skipped: (result.numPendingTests ?? 0) + (result.numTodoTests ?? 0),
    brokenFiles,
    failedTests,
  };
}

/**
 * Where unhandled-errors-reporter.mjs writes the unhandled errors of the run whose JSON report is
 * at `reportPath` (the runner passes it in DOCKET_UNHANDLED_ERRORS_FILE).
 *
 * @param {string} reportPath
 */
export function unhandledErrorsPathFor(reportPath) {
  return `${reportPath.replace(/\.json$/, '')}.unhandled.json`;
}

/**
 * The unhandled errors written beside a report; none when the file is missing (a run with no
 * unhandled-errors reporter, or one that ended before writing it: its exit code still counts).
 *
 * @param {string} reportPath
 * @returns {{ message: string, stack?: string, testFile?: string, testName?: string }[]}
 */
function readUnhandledErrors(reportPath) {
  const path = unhandledErrorsPathFor(reportPath);
  if (!existsSync(path)) return [];
  try {
    return JSON.parse(readFileSync(path, 'utf8')).unhandledErrors ?? [];
  } catch (error) {
    return [{ message: `unreadable ${path}: ${error}` }];
  }
}

/**
 * One line naming an unhandled error: its message's first line, the first frame of the stack that
 * is not Node's or a dependency's, and the test vitest saw running when it surfaced.
 *
 * @param {{ message: string, stack?: string, testFile?: string, testName?: string }} error
 */
function unhandledErrorName(error) {
  const message = String(error.message ?? '')
    .split('\n')[0]
    .slice(0, 300);
  const frame = String(error.stack ?? '')
    .split('\n')
    .map((line) => line.trim())
    .find((line) => line.startsWith('at ') && !line.includes('node_modules') && !line.includes('node:internal'));
  const during = error.testFile
    ? ` (surfaced during ${relativeName(error.testFile)}${error.testName ? ` > ${error.testName}` : ''})`
    : '';
  return `unhandled error outside any test: ${message}${frame ? ` [${frame}]` : ''}${during}`;
}

/** @param {string} name an absolute test file path */
function relativeName(name) {
  const cwd = `${process.cwd()}/`;
  return name.startsWith(cwd) ? name.slice(cwd.length) : name;
}

/**
 * The plain closing line CI reads: "N passed, N failed" (", N skipped" only when some were).
 *
 * @param {{ passed: number, failed: number, skipped: number }} counts
 */
export function closingLine(counts) {
  return `${counts.passed} passed, ${counts.failed} failed${counts.skipped ? `, ${counts.skipped} skipped` : ''}`;
}

/**
 * One vitest-shaped report out of several (the phases of run-tests.mjs). A phase that wrote no
 * readable report becomes a failed file entry, so the merged report still counts it as a failure.
 *
 * @param {string[]} paths the phases' JSON reports
 */
export function mergeVitestReports(paths) {
  const merged = {
    numPassedTests: 0,
    numFailedTests: 0,
    numPendingTests: 0,
    numTodoTests: 0,
    testResults: [],
    unhandledErrors: [],
  };
  for (const path of paths) {
    let part;
    try {
      part = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : undefined;
    } catch {
      part = undefined;
    }
    if (!part) {
      merged.testResults.push({
        name: path,
        status: 'failed',
        message: `no usable report at ${path}`,
        assertionResults: [],
      });
      continue;
    }
    merged.numPassedTests += part.numPassedTests ?? 0;
    merged.numFailedTests += part.numFailedTests ?? 0;
    merged.numPendingTests += part.numPendingTests ?? 0;
    merged.numTodoTests += part.numTodoTests ?? 0;
    merged.testResults.push(...(part.testResults ?? []));
    merged.unhandledErrors.push(...readUnhandledErrors(path));
  }
  return merged;
}
