/**
 * The benchmark harness in smoke mode, so it cannot rot: every system (Docket on PostgreSQL and
 * SQLite, graphile-worker, pg-boss, BullMQ) runs every workload at tiny sizes, each run checked for
 * exactly-once execution, and the report is written. Speed is not judged here; `npm run bench` is.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const outDir = mkdtempSync(join(tmpdir(), 'docket-bench-ci-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

function runBench(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['tsx', 'bench/run.ts', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('benchmark harness (smoke mode)', () => {
  it('runs every system and workload with no lost or doubled job, and writes the report', async () => {
    const { code, output } = await runBench(['--smoke', '--out', outDir]);
    expect(code, output.slice(-4000)).toBe(0);
    expect(output).not.toMatch(/NOT OK/);
    const report = readFileSync(join(outDir, 'RESULTS.md'), 'utf8');
    expect(report).toMatch(/graphile-worker/);
    expect(report).toMatch(/docket/);
    expect(existsSync(join(outDir, 'results.json'))).toBe(true);
  }, 240_000);
});
