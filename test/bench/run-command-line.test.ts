/**
 * `npm run bench`'s command line: --help prints the usage of bench/run.ts's leading comment, and a
 * mistyped option, workload or number is refused in one line naming it (exit 2), before anything
 * runs or touches a database. It used to die with parseArgs' stack trace.
 */
import { describe, expect, it } from 'vitest';
import { runTsxScript } from '../support/run-tsx-script.js';

const run = (...args: string[]) => runTsxScript('bench/run.ts', args);

describe('bench/run.ts command line', () => {
  it('--help prints the usage and exits 0', async () => {
    const { code, output } = await run('--help');
    expect(code).toBe(0);
    expect(output).toMatch(/^`npm run bench`: Docket against graphile-worker/);
    expect(output).toContain('npm run bench -- --only drain,spike');
    expect(output).not.toMatch(/^\s*\*/m);
  });

  it.each([
    [['--bogus'], "Unknown option '--bogus'"],
    [['--rounds', 'three'], '--rounds must be a positive number, got "three"'],
    [['--max-minutes', '0'], '--max-minutes must be a positive number, got "0"'],
    [['--only', 'drain,spiek'], 'unknown workload spiek; known: drain, backlog'],
  ])('refuses %j in one line, exit 2', async (args, message) => {
    const { code, output } = await run(...args);
    expect(code).toBe(2);
    expect(output).toContain(`bench/run.ts: ${message}`);
    expect(output).toContain('Run it with --help');
    expect(output).not.toContain('    at ');
  });
});
