/**
 * `docket jobs list` and `docket dead list` take the job filter through the one filter parser:
 * a real `docket` process on SQLite finds jobs by payload in either order, and a bad payload
 * filter exits 2 with the reason the library and the HTTP API give, naming `payload`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import type { Job } from '../../src/job/job.js';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';
import { describeRun, runDocket } from './run-docket.js';

describe('docket jobs list with the job filter', () => {
  let db: TestDatabase;
  const ids: string[] = [];
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    const docket = await Docket.open({ url: db.url });
    for (const customerId of [42, 7, 42]) {
      ids.push((await docket.submit({ kind: 'f.k', queue: 'f', payload: { customerId }, delayMs: 60_000 })).id);
    }
    await docket.close();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('lists the jobs whose payload matches, newest first with --order desc', async () => {
    const run = await runDocket([
      'jobs',
      'list',
      '--db',
      db.url,
      '--payload',
      'payload.customerId = 42',
      '--order',
      'desc',
      '--json',
    ]);
    expect(run.code, describeRun(run)).toBe(0);
    expect((JSON.parse(run.stdout) as Job[]).map((job) => job.id)).toEqual([ids[2], ids[0]]);
  });

  it('refuses a payload filter it cannot read, naming payload, exit 2', async () => {
    const run = await runDocket(['jobs', 'list', '--db', db.url, '--payload', 'payload.customerId > 42']);
    expect(run.code, describeRun(run)).toBe(2);
    expect(run.stderr).toContain('payload: must be a payload filter like payload.customerId = 42');
  });
});
