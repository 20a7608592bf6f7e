#!/usr/bin/env node
// Runs the whole vitest suite and prints the plain closing line CI reads: "N passed, N failed".
// vitest's own summary is not read by CI, so the counts come from its JSON report. Exits non-zero
// when any test failed, any file failed to load, or no test ran at all.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';

const report = '.test-report.json';
rmSync(report, { force: true });
const args = [
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${report}`,
  ...process.argv.slice(2),
];
const run = spawnSync('npx', args, { stdio: 'inherit' });

if (!existsSync(report)) {
  console.log('0 passed, 1 failed');
  console.error(`vitest wrote no report (exit ${run.status}); treating the run as failed.`);
  process.exit(1);
}
const result = JSON.parse(readFileSync(report, 'utf8'));
const passed = result.numPassedTests ?? 0;
let failed = result.numFailedTests ?? 0;
const skipped = (result.numPendingTests ?? 0) + (result.numTodoTests ?? 0);
// A file that fails to import has no failing test, yet the run is broken: count it as a failure.
const brokenFiles = (result.testResults ?? []).filter(
  (file) => file.status === 'failed' && file.assertionResults?.length === 0,
);
failed += brokenFiles.length;
for (const file of brokenFiles) console.error(`test file failed to run: ${file.name}\n${file.message ?? ''}`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || passed === 0 || run.status !== 0 ? 1 : 0);
