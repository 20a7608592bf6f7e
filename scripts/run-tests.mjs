#!/usr/bin/env node
// Runs the whole vitest suite and prints the plain closing line CI reads: "N passed, N failed".
// vitest's own summary is not read by CI, so the counts come from its JSON report, which stays in
// .test-report.json for .ci/run to fold into its own closing line. Exits non-zero when any test
// failed, any file failed to load, or no test ran at all.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { closingLine, readVitestReport } from './vitest-report.mjs';

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

const counts = readVitestReport(report);
if (counts.problem) console.error(`vitest wrote no usable report (exit ${run.status}): ${counts.problem}`);
for (const file of counts.brokenFiles) console.error(`test file failed to run: ${file.name}\n${file.message}`);
for (const name of counts.failedTests) console.error(`failed: ${name}`);
console.log(closingLine(counts));
process.exit(counts.failed > 0 || counts.passed === 0 || run.status !== 0 ? 1 : 0);
