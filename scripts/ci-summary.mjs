#!/usr/bin/env node
/**
 * The last thing .ci/run prints: one table of what ran, then CI's single closing line
 * "N passed, N failed" summing the main suite (`npm test`, .test-report.json), the unit and
 * conformance suites on the other Node lines (.node-lines-report.json) and the package check
 * (.package-check-report.json, one count per step). A part whose report is missing counts as one
 * failure, and so does a part that exited non-zero while its report showed no failure, so the
 * closing line can never read green over a broken step. Exits 1 when anything failed.
 *
 * Usage: node scripts/ci-summary.mjs <name>=<exit code>:<seconds> …
 *   names: install, main, node-lines, package (any other name is shown, with its time, but not counted)
 */
import { existsSync, readFileSync } from 'node:fs';
import { closingLine, readVitestReport } from './vitest-report.mjs';

const steps = new Map(
  process.argv.slice(2).map((argument) => {
    const [name, rest = ''] = argument.split('=');
    const [exit, secs] = rest.split(':');
    return [name, { exit: Number(exit), seconds: Number(secs) }];
  }),
);

/** @type {{ name: string, passed: number, failed: number, skipped: number, note?: string }[]} */
const parts = [];

const main = readVitestReport('.test-report.json');
parts.push({ name: 'main suite (npm test)', ...main, note: main.problem });
/** Failing tests, by name, printed just above the closing line so CI's tail shows them. */
const failedNames = [...main.failedTests, ...main.brokenFiles.map((file) => `${file.name} (failed to load)`)];

if (steps.has('node-lines')) {
  const report = readJson('.node-lines-report.json');
  if (!report) parts.push({ name: 'Node lines', passed: 0, failed: 1, skipped: 0, note: 'no .node-lines-report.json' });
  for (const line of report?.lines ?? []) {
    parts.push({
      name: `Node ${line.version} (${(report.suites ?? []).join(' + ')})`,
      passed: line.passed,
      failed: line.failed,
      skipped: line.skipped ?? 0,
      note: line.problem,
    });
    for (const name of line.failedTests ?? []) failedNames.push(`[Node ${line.version}] ${name}`);
  }
}

if (steps.has('package')) {
  const report = readJson('.package-check-report.json');
  parts.push(
    report
      ? { name: 'package check (steps)', passed: report.passed, failed: report.failed, skipped: 0 }
      : { name: 'package check', passed: 0, failed: 1, skipped: 0, note: 'no .package-check-report.json' },
  );
}

// An exit code is the last word: a part that failed without a failing count still fails.
const partFor = { main: parts[0], 'node-lines': parts.find((p) => p.name.startsWith('Node')), package: parts.at(-1) };
for (const [name, step] of steps) {
  const part = partFor[name];
  if (step.exit !== 0 && part && part.failed === 0) {
    part.failed = 1;
    part.note = `${part.note ? `${part.note}; ` : ''}exited ${step.exit}`;
  }
}
const installFailed = steps.has('install') && steps.get('install').exit !== 0;

console.log('\nCI summary');
for (const [name, step] of steps) {
  console.log(`  step ${name.padEnd(12)} exit ${String(step.exit).padEnd(4)} ${step.seconds} s`);
}
for (const part of parts) {
  console.log(
    `  ${part.failed === 0 && part.passed > 0 ? 'ok  ' : 'FAIL'} ${part.name}: ${closingLine(part)}${part.note ? ` (${part.note})` : ''}`,
  );
}
const total = parts.reduce(
  (sum, part) => ({
    passed: sum.passed + part.passed,
    failed: sum.failed + part.failed,
    skipped: sum.skipped + part.skipped,
  }),
  { passed: 0, failed: installFailed ? 1 : 0, skipped: 0 },
);
if (failedNames.length > 0) {
  console.log('\nFailed tests');
  for (const name of failedNames) console.log(`  ${name}`);
}
// Nothing may be printed after this line: CI reads it as the run's result.
console.log(closingLine(total));
process.exit(total.failed > 0 || total.passed === 0 ? 1 : 0);

function readJson(path) {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return null;
  }
}
