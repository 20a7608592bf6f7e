/**
 * The peers at their latest releases (this folder's package.json, installed apart from the
 * repository's node_modules with `npm install --prefix bench/peers-latest`), run on Node 24 beside
 * the repository's releases on the harness's Node: `npm run bench -- --peers-latest`.
 *
 * The drivers are the repository's own (bench/systems/*), handed the newer library modules; the
 * libraries are imported from this folder, so a bare specifier resolves to this folder's
 * node_modules, never the repository's. Every part of a latest system runs on Node 24: its worker
 * processes are forked with the Node 24 binary, and when the harness itself runs on an older Node
 * (these releases need Node 22+), its store side (reset, inserts, single submits, counting) runs
 * in a Node 24 host process the harness talks to (remote-system.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installNode, NODE_LINES, nodeLine } from '../../scripts/node-binary.mjs';
import { type BullmqLibrary, makeBullmqSystem } from '../systems/bullmq.js';
import { type GraphileWorkerLibrary, makeGraphileWorkerSystem } from '../systems/graphile-worker.js';
import { makePgBossSystem, type PgBossLibrary } from '../systems/pg-boss.js';
import type { SystemModule, SystemName } from '../systems/system.js';

const PEERS_DIR = dirname(fileURLToPath(import.meta.url));
/** The Node line the latest releases run on. */
export const LATEST_NODE_MAJOR = 24;
/** The oldest Node these releases support (graphile-worker 0.18: 22.18; pg-boss 12: 22.12). */
const MIN_DIRECT_MAJOR = 22;

/** The systems this folder provides, and the packages each needs. */
export const LATEST_SYSTEMS = {
  'graphile-worker-latest': ['graphile-worker'],
  'pg-boss-latest': ['pg-boss'],
  'bullmq-latest': ['bullmq', 'ioredis'],
} as const satisfies Partial<Record<SystemName, readonly string[]>>;

/** One of {@link LATEST_SYSTEMS}. */
export type LatestSystemName = keyof typeof LATEST_SYSTEMS;

/** Whether a system name is one of this folder's. */
export function isLatestSystem(name: string): name is LatestSystemName {
  return Object.hasOwn(LATEST_SYSTEMS, name);
}

/** The version pinned in this folder's package.json, checked against what is installed. */
export function installedVersion(pkg: string): string {
  const manifest = JSON.parse(readFileSync(join(PEERS_DIR, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const pinned = manifest.dependencies[pkg];
  const installed = join(PEERS_DIR, 'node_modules', pkg, 'package.json');
  if (!pinned) throw new Error(`${pkg} is not in bench/peers-latest/package.json`);
  if (!existsSync(installed)) {
    throw new Error(`${pkg}@${pinned} is not installed: run npm install --prefix bench/peers-latest`);
  }
  const version = (JSON.parse(readFileSync(installed, 'utf8')) as { version: string }).version;
  if (version !== pinned) {
    throw new Error(
      `bench/peers-latest has ${pkg}@${version} but package.json pins ${pinned}: run npm install --prefix bench/peers-latest`,
    );
  }
  return version;
}

/** The Node 24 binary (installed into the shared cache on first use, like scripts/run-node-lines.mjs). */
export function latestNodePath(): string {
  return nodePathOfLine(LATEST_NODE_MAJOR);
}

/**
 * The major of a pinned Node line given as a flag's value (`--docket-node 24`), or a clear error
 * naming the flag and the pinned lines.
 */
export function pinnedNodeMajor(flag: string, text: string): number {
  const major = Number(text);
  const pinned = (NODE_LINES as readonly string[]).map((line) => Number(line.split('.')[0]));
  if (!/^\d+$/.test(text) || !pinned.includes(major))
    throw new Error(`--${flag} must be one of the pinned Node lines ${pinned.join(', ')}, got ${JSON.stringify(text)}`);
  return major;
}

/** The binary of one pinned Node line (installed into the shared cache on first use). */
export function nodePathOfLine(major: number): string {
  return join(installNode(nodeLine(major)), 'bin', 'node');
}

/** Versions for the report: each latest package as installed, and the Node they run on. */
export function latestVersions(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const packages of Object.values(LATEST_SYSTEMS))
    for (const pkg of packages) {
      try {
        out[`${pkg} (latest, Node ${LATEST_NODE_MAJOR})`] = installedVersion(pkg);
      } catch (error) {
        out[`${pkg} (latest)`] = `unavailable: ${(error as Error).message}`;
      }
    }
  out[`Node (latest peers)`] = nodeLine(LATEST_NODE_MAJOR);
  return out;
}

function nodeMajor(): number {
  return Number(process.versions.node.split('.')[0]);
}

async function importInstalled(pkg: string): Promise<unknown> {
  installedVersion(pkg);
  // A bare specifier resolves from this file's folder: bench/peers-latest/node_modules.
  return import(pkg);
}

/** Loads one latest system: directly on Node 22+, else through a Node 24 host process. */
export async function loadLatestSystem(name: LatestSystemName): Promise<SystemModule> {
  if (nodeMajor() < MIN_DIRECT_MAJOR) {
    const { remoteSystem } = await import('./remote-system.js');
    return remoteSystem(name, latestNodePath());
  }
  switch (name) {
    case 'graphile-worker-latest':
      return makeGraphileWorkerSystem((await importInstalled('graphile-worker')) as GraphileWorkerLibrary, name);
    case 'pg-boss-latest': {
      // pg-boss 12 has no default export: the class is the named export PgBoss.
      const { PgBoss } = (await importInstalled('pg-boss')) as { PgBoss: PgBossLibrary['PgBoss'] };
      return makePgBossSystem({ PgBoss, generation: 12 }, name);
    }
    case 'bullmq-latest': {
      const { Queue, Worker } = (await importInstalled('bullmq')) as Pick<BullmqLibrary, 'Queue' | 'Worker'>;
      const { Redis } = (await importInstalled('ioredis')) as Pick<BullmqLibrary, 'Redis'>;
      return makeBullmqSystem({ Queue, Worker, Redis }, name);
    }
  }
}
