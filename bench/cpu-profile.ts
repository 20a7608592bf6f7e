/**
 * Summarises V8 `.cpuprofile` files (from `node --cpu-prof`) into where the time goes: self time by
 * function and by package or source file, so a missed target comes with its profile.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
}

/** Self time of one function or one package, as a share of all samples. */
export interface ProfileEntry {
  name: string;
  selfMs: number;
  share: number;
}

/** A profile summary. */
export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Share of samples in which the process was idle (waiting on I/O). */
  idleShare: number;
  topFunctions: ProfileEntry[];
  topPackages: ProfileEntry[];
}

function packageOf(url: string): string {
  if (url === '') return '(native / V8)';
  if (url.startsWith('node:')) return url.split('/')[0]!;
  const nodeModules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nodeModules) return nodeModules[1]!;
  const source = /\/(src|bench)\/(.+)$/.exec(url);
  if (source) return `${source[1]}/${source[2]}`;
  return url;
}

function shortUrl(url: string): string {
  return url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench)\//, '$1/');
}

function top(map: Map<string, number>, total: number, perSampleMs: number, n: number): ProfileEntry[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, hits]) => ({ name, selfMs: hits * perSampleMs, share: total > 0 ? hits / total : 0 }));
}

/** Summarises one profile file. */
export function summarizeProfile(file: string, n = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const totalHits = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  const totalMs = (profile.endTime - profile.startTime) / 1000;
  const perSampleMs = totalHits > 0 ? totalMs / totalHits : 0;
  const byFunction = new Map<string, number>();
  const byPackage = new Map<string, number>();
  let idle = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idle += hits;
      continue;
    }
    const name = `${functionName || '(anonymous)'} ${url ? `${shortUrl(url)}:${lineNumber + 1}` : ''}`.trim();
    byFunction.set(name, (byFunction.get(name) ?? 0) + hits);
    const pkg = packageOf(url);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + hits);
  }
  return {
    file,
    totalMs,
    idleShare: totalHits > 0 ? idle / totalHits : 0,
    topFunctions: top(byFunction, totalHits, perSampleMs, n),
    topPackages: top(byPackage, totalHits, perSampleMs, n),
  };
}

/** Summarises every `.cpuprofile` in a directory. */
export function summarizeProfiles(dir: string): ProfileSummary[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.cpuprofile'))
    .map((name) => summarizeProfile(join(dir, name)));
}
