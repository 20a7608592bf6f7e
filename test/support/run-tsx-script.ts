/** Runs a TypeScript script of this checkout through tsx, as a user runs a bench script, and collects its output. */
import { spawn } from 'node:child_process';

/** `npx tsx <script> <args…>`: the exit code and stdout and stderr together, in arrival order. */
export function runTsxScript(
  script: string,
  args: readonly string[],
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['tsx', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
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
