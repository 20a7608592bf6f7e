/**
 * `docket serve` wires the CLI to the HTTP server: flags pass through to the server's own
 * validation (bad values exit 2 naming the setting), it serves until SIGTERM and then exits 0.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, runDocket, startDocket } from './run-docket.js';

describe('docket serve', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-cli-serve-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the API on the store from DOCKET_DATABASE_URL until SIGTERM, then exits 0', async () => {
    const server = startDocket(['serve', '--port', '0', '--concurrency', '0', '--log-level', 'warn'], {
      env: { DOCKET_DATABASE_URL: `sqlite:${join(dir, 'serve.db')}` },
    });
    try {
      await expect
        .poll(() => /serving on (http:\/\/\S+)/.exec(server.output().stderr)?.[1], { timeout: 20_000 })
        .toBeTruthy();
      const url = /serving on (http:\/\/\S+)/.exec(server.output().stderr)?.[1];
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      expect(existsSync(join(dir, 'serve.db'))).toBe(true);
      server.child.kill('SIGTERM');
      const exit = await server.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  it('exits 2 naming the setting when a flag fails the server validation', async () => {
    const result = await runDocket(['serve', '--port', '80a']);
    expect(result.code, describeRun(result)).toBe(2);
    expect(result.stderr).toContain('port (from --port): must be an integer from 0 to 65535');
  });
});
