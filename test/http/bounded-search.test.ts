/**
 * The dashboard's bounded payload search (src/http/bounded-search.ts) on both stores: followed
 * page by page it yields exactly the rows an unbounded filtered list yields, in the same order,
 * none twice and none skipped, ascending and descending, inside the caller's own id range; a
 * spent budget stops a page after one window and says where; and over HTTP a page cut short
 * carries `searchedThrough` and a `next` that goes on from there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { boundedSearch, type SearchBounds } from '../../src/http/bounded-search.js';
import type { JobFilter, ListOrder } from '../../src/job/job-filter.js';
import { parsePayloadFilter } from '../../src/job/job-filter.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';

const SMALL: SearchBounds = { windowIds: 25n, maxWindows: 2, budgetMs: 1e9 };

for (const kind of storeKinds()) {
  describe(`bounded payload search (${kind})`, () => {
    let db: TestDatabase;
    let docket: Docket;
    let ids: string[];
    beforeAll(async () => {
      db = await createTestDatabase(kind);
      docket = await Docket.open({ url: db.url, schema: db.schema });
      const results = await docket.submitMany(
        Array.from({ length: 400 }, (_, i) => ({ kind: 'search.test', payload: { n: i % 37 === 0 ? 'hit' : i } })),
      );
      ids = results.map((r) => r.id);
    });
    afterAll(async () => {
      await docket?.close();
      await db?.drop();
    });

    const list = (params: Parameters<Docket['listJobs']>[0]) => docket.listJobs(params);

    async function follow(filter: JobFilter, order: ListOrder, limit: number, bounds = SMALL) {
      const seen: string[] = [];
      let after: string | undefined;
      let requests = 0;
      for (;;) {
        const page = await boundedSearch(list, { filter, limit, afterId: after, order }, () => 0, bounds);
        requests++;
        expect(page.jobs.length).toBeLessThanOrEqual(limit);
        seen.push(...page.jobs.map((job) => job.id));
        if (page.next === null) return { seen, requests };
        after = page.next;
        expect(requests).toBeLessThan(200);
      }
    }

    for (const order of ['asc', 'desc'] as const) {
      it(`pages through every match, none twice, none skipped (${order})`, async () => {
        const filter: JobFilter = { payload: parsePayloadFilter('payload.n = "hit"') };
        const unbounded = (await docket.listJobs({ ...filter, limit: 1000, order })).map((job) => job.id);
        expect(unbounded.length).toBe(11);
        const { seen, requests } = await follow(filter, order, 3);
        expect(seen).toEqual(unbounded);
        // 400 ids in windows of 25, two windows per request: the search really was split.
        expect(requests).toBeGreaterThanOrEqual(8);
      });

      it(`keeps to the caller's id range (${order})`, async () => {
        const filter: JobFilter = {
          payload: parsePayloadFilter('payload.n = "hit"'),
          idFrom: ids[50],
          idTo: ids[300],
        };
        const unbounded = (await docket.listJobs({ ...filter, limit: 1000, order })).map((job) => job.id);
        expect(unbounded.length).toBeGreaterThan(3);
        expect((await follow(filter, order, 2)).seen).toEqual(unbounded);
      });
    }

    it('stops after one window once the budget is spent, saying where, and goes on from there', async () => {
      const filter: JobFilter = { payload: parsePayloadFilter('payload.n = "never"') };
      const spent = { ...SMALL, maxWindows: 8, budgetMs: 10 };
      const page = await boundedSearch(list, { filter, limit: 50, afterId: undefined, order: 'asc' }, () => 11, spent);
      expect(page.jobs).toEqual([]);
      expect(page.searchedThrough).toBe(String(BigInt(ids[0]!) + 24n));
      expect(page.next).toBe(page.searchedThrough);
      const { seen } = await follow(filter, 'asc', 50, spent);
      expect(seen).toEqual([]);
    });

    it('passes a list without a payload filter straight through', async () => {
      const page = await boundedSearch(list, { filter: {}, limit: 10, afterId: undefined, order: 'asc' }, () => 1e9);
      expect(page.jobs.map((job) => job.id)).toEqual(ids.slice(0, 10));
      expect(page.next).toBe(ids[9]);
      expect(page.searchedThrough).toBeUndefined();
    });
  });
}
