#!/usr/bin/env node
// Runs the whole vitest suite and prints the plain closing line CI reads: "N passed, N failed".
// vitest's own summary is not read by CI, so the counts come from its JSON reports, merged into
// .test-report.json for .ci/run to fold into its own closing line. Exits non-zero when any test
// failed, any file failed to load, or no test ran at all.
//
// The whole suite runs in two phases. First everything but the suites that boot clusters of their
// own (Patroni and etcd, network namespaces, a PostgreSQL killed twenty times), two files at a
// time; then those, one at a time. Booting a Patroni cluster beside the rest of the suite on this
// 2-core machine took from 8 s alone to past 120 s, and a timeout there says nothing about Docket.
// With arguments (file filters, flags) it is one plain vitest run, as before.
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { closingLine, mergeVitestReports, readVitestReport, unhandledErrorsPathFor } from './vitest-report.mjs';

/** Suites that start their own clusters, run after the rest and one at a time (folders or files). */
const OWN_CLUSTER_SUITES = ['test/failover/', 'test/partition/', 'test/stress/database-restarts.test.ts'];
const excludeGlob = (suite) => (suite.endsWith('/') ? `${suite}**` : suite);

const report = '.test-report.json';
/** Writes the errors vitest's JSON report leaves out (those outside any test) beside each report. */
const UNHANDLED_ERRORS_REPORTER = './scripts/unhandled-errors-reporter.mjs';
rmSync(report, { force: true });
const extra = process.argv.slice(2);

const phases =
  extra.length > 0
    ? [{ name: 'tests', args: extra }]
    : [
        { name: 'main', args: OWN_CLUSTER_SUITES.flatMap((suite) => ['--exclude', excludeGlob(suite)]) },
        { name: 'own-cluster', args: ['--maxWorkers=1', ...OWN_CLUSTER_SUITES] },
      ];

let exitedBadly = false;
const parts = [];
for (const phase of phases) {
  const partReport = phases.length === 1 ? report : `.test-report.${phase.name}.json`;
  rmSync(partReport, { force: true });
  rmSync(unhandledErrorsPathFor(partReport), { force: true });
  if (phases.length > 1) console.log(`\n=== tests, phase ${phase.name} ===`);
  const run = spawnSync(
    'npx',
    [
      'vitest',
      'run',
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${partReport}`,
      `--reporter=${UNHANDLED_ERRORS_REPORTER}`,
      ...phase.args,
    ],
    { stdio: 'inherit', env: { ...process.env, DOCKET_UNHANDLED_ERRORS_FILE: unhandledErrorsPathFor(partReport) } },
  );
  if (run.status !== 0) exitedBadly = true;
  parts.push(partReport);
}
if (parts.length > 1) writeFileSync(report, JSON.stringify(mergeVitestReports(parts)));

const counts = readVitestReport(report);
if (counts.problem) console.error(`vitest wrote no usable report: ${counts.problem}`);
for (const file of counts.brokenFiles) console.error(`test file failed to run: ${file.name}\n${file.message}`);
for (const name of counts.failedTests) console.error(`failed: ${name}`);
console.log(closingLine(counts));
process.exit(counts.failed > 0 || counts.passed === 0 || exitedBadly ? 1 : 0);
