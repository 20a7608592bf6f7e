/**
 * The dashboard in a real browser against a real server (`startServer`, as `docket serve`
 * runs it) on one store: every page loads and passes axe-core at 1280×800 and 390×844, its
 * counts match the store, a job is followed pending → running → done and another to dead and
 * back by the dead-letter page's Retry, 100,000 dead letters (seeded with SQL) are bulk-retried
 * with the progress bar reaching 100 % and the store agreeing, a paused queue stops claims, an
 * XSS payload stays text, a read token cannot act, and the CSP header is there.
 */

import pg from 'pg';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/dashboard/dashboard-page.js';
import type { Worker } from '../../src/worker/worker.js';
import { startTestServer, type TestServer, TOKENS } from '../http/http-support.js';
import { POSTGRES_URL, type StoreKind } from '../support/stores.js';
import {
  browserMissingReason,
  launchBrowser,
  screenshot,
  seriousViolations,
  type TestBrowser,
} from './browser-support.js';

const XSS = '<img src=x onerror=alert(1)>';
const BULK_COUNT = 100_000;
const PAGES = ['overview', 'jobs', 'dead', 'schedules', 'queues', 'workers'] as const;

/** Runs SQL against the test database (assertions and seeding only; the page never does). */
async function sql(server: TestServer, text: string): Promise<Record<string, unknown>[]> {
  if (server.db.kind === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(server.db.url.replace(/^sqlite:/, ''));
    try {
      db.pragma('busy_timeout = 10000');
      const statement = db.prepare(text);
      if (statement.reader) return statement.all() as Record<string, unknown>[];
      statement.run();
      return [];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${server.db.schema}`);
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

/** Copies dead letter `templateId` `count` times under fresh ids, in one statement. */
async function seedDeadCopies(server: TestServer, templateId: string, count: number, firstId: number): Promise<void> {
  const columns =
    server.db.kind === 'sqlite'
      ? (await sql(server, 'PRAGMA table_info(dead_jobs)')).map((row) => String(row.name))
      : (
          await sql(
            server,
            `SELECT column_name AS name FROM information_schema.columns WHERE table_schema = '${server.db.schema}' AND table_name = 'dead_jobs' ORDER BY ordinal_position`,
          )
        ).map((row) => String(row.name));
  const rest = columns.filter((name) => name !== 'id');
  const list = rest.join(', ');
  // The copies go to the bulk queue under a kind no worker handles, so retried ones stay pending.
  const copied = rest
    .map((name) => (name === 'queue' ? "'bulk'" : name === 'kind' ? "'bulk.seeded'" : `t.${name}`))
    .join(', ');
  await sql(
    server,
    server.db.kind === 'sqlite'
      ? `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${count - 1})
         INSERT INTO dead_jobs (id, ${list}) SELECT ${firstId} + n.i, ${copied} FROM n, dead_jobs t WHERE t.id = ${templateId}`
      : `INSERT INTO dead_jobs (id, ${list}) SELECT ${firstId} + n.i, ${copied}
         FROM generate_series(0, ${count - 1}) AS n(i), dead_jobs t WHERE t.id = ${templateId}`,
  );
}

async function countRows(server: TestServer, text: string): Promise<number> {
  const [row] = await sql(server, text);
  return Number(row?.n ?? Number.NaN);
}

/** Opens the dashboard at `hash` and signs in with `token` (the page asks once per tab). */
async function openSignedIn(
  browser: TestBrowser,
  server: TestServer,
  token: string,
  hash = '#/overview',
): Promise<Page> {
  const page = await browser.page();
  await page.goto(`${server.url}/${hash}`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.locator('#nav a').first().waitFor();
  return page;
}

/** The whole browser suite against a server on `kind`. */
export function dashboardSuite(kind: StoreKind): void {
  const missing = browserMissingReason();
  describe.skipIf(missing !== undefined)(
    `dashboard in chromium on ${kind}${missing ? ` (skipped: ${missing})` : ''}`,
    () => {
      let server: TestServer;
      let browser: TestBrowser;
      let worker: Worker;
      let admin: Page;
      let releaseWork: () => void = () => {};
      const workGate = new Promise<void>((resolve) => {
        releaseWork = resolve;
      });
      let failing = true;

      beforeAll(async () => {
        server = await startTestServer({ kind, tokens: [TOKENS.read, TOKENS.all] });
        const docket = server.server.docket;
        docket.handle('dash.work', async () => {
          await workGate;
        });
        docket.handle('dash.doomed', async () => {
          throw new Error('doomed');
        });
        docket.handle('dash.fail', async () => {
          if (failing) throw new Error(`payment declined ${XSS}`);
        });
        worker = docket.worker({ queues: ['work', 'other'], concurrency: 4, pollIntervalMs: 100, leaseMs: 10_000 });
        await worker.start();
        browser = await launchBrowser();
        admin = await openSignedIn(browser, server, TOKENS.all.token);
      });
      afterAll(async () => {
        releaseWork();
        await worker?.stop();
        await browser?.close();
        await server?.stop();
      });

      it('serves the page with the strict CSP, cacheable hashed assets and no inline script or style', async () => {
        const response = await fetch(`${server.url}/`);
        expect(response.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
        expect(DASHBOARD_CSP).toContain("default-src 'self'");
        expect(response.headers.get('cache-control')).toBe('no-cache');
        const html = await response.text();
        expect(html).not.toMatch(/style=|<style|<script(?![^>]*\bsrc=)/);
        const module = html.match(/src="(assets\/[0-9a-f]+\/main\.js)"/)?.[1];
        expect(module).toBeDefined();
        const asset = await fetch(`${server.url}/${module}`);
        expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
        expect(asset.headers.get('cache-control')).toContain('immutable');
        expect(asset.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
        // The browser saw the same header on the page it loaded.
        const page = await browser.page();
        const seen = await page.goto(`${server.url}/#/overview`);
        expect((await seen?.allHeaders())?.['content-security-policy']).toBe(DASHBOARD_CSP);
        await page.close();
      });

      it('loads every page at desktop and phone width, with counts matching the store and no serious axe violations', async () => {
        const docket = server.server.docket;
        const future = new Date(Date.now() + 3_600_000).toISOString();
        await docket.submitMany([
          ...Array.from({ length: 7 }, (_, i) => ({ kind: 'mail.send', queue: 'mail', payload: { i } })),
          ...Array.from({ length: 3 }, (_, i) => ({ kind: 'mail.send', queue: 'mail', payload: { i }, runAt: future })),
        ]);
        await docket.schedule({
          id: 'nightly-report',
          cron: '0 3 * * *',
          timeZone: 'Europe/Berlin',
          job: { kind: 'report.build', queue: 'reports' },
        });
        const stats = (await docket.queueStats()).find((q) => q.queue === 'mail');
        expect(stats).toMatchObject({ available: 7, scheduled: 3 });
        for (const viewport of [
          { width: 1280, height: 800, name: 'desktop' },
          { width: 390, height: 844, name: 'phone' },
        ]) {
          await admin.setViewportSize(viewport);
          for (const name of PAGES) {
            await admin.goto(`${server.url}/#/${name}`);
            await admin.locator('main h1').first().waitFor();
            await admin.locator(`#nav a[aria-current="page"][href="#/${name}"]`).waitFor();
            if (name === 'overview') {
              const row = admin.locator('tr', { has: admin.getByRole('link', { name: 'mail', exact: true }) });
              await expect.poll(() => row.locator('[data-state="available"]').textContent()).toMatch(/^7\b/);
              expect(await row.locator('[data-state="scheduled"]').textContent()).toMatch(/^3\b/);
            }
            if (name === 'schedules') {
              await admin.getByText('nightly-report').waitFor();
              // The next five runs, by the cron in its zone.
              expect(await admin.locator('tr', { hasText: 'nightly-report' }).locator('ol li').count()).toBe(5);
            }
            if (name === 'workers') await admin.getByText(worker.id).first().waitFor();
            expect(JSON.stringify(await seriousViolations(admin), null, 1), `${name} at ${viewport.name}`).toBe('[]');
            await screenshot(admin, `${kind}-${name}-${viewport.name}`);
          }
        }
        await admin.setViewportSize({ width: 1280, height: 800 });
        // Dark mode (prefers-color-scheme): the same pages keep their contrast.
        await admin.emulateMedia({ colorScheme: 'dark' });
        for (const name of PAGES) {
          await admin.goto(`${server.url}/#/${name}`);
          await admin.locator(`#nav a[aria-current="page"][href="#/${name}"]`).waitFor();
          await admin.locator('main h1').first().waitFor();
          expect(JSON.stringify(await seriousViolations(admin), null, 1), `${name} in dark mode`).toBe('[]');
          await screenshot(admin, `${kind}-${name}-dark`);
        }
        await admin.emulateMedia({ colorScheme: 'light' });
      });

      it('is usable from the keyboard: skip link, navigation and the filter form', async () => {
        await admin.goto(`${server.url}/#/overview`);
        // A fresh load, so focus starts at the top of the document.
        await admin.reload();
        await admin.locator('main h1').first().waitFor();
        await admin.keyboard.press('Tab');
        expect(await admin.locator(':focus').textContent()).toBe('Skip to content');
        await admin.keyboard.press('Tab');
        await admin.keyboard.press('Tab');
        expect(await admin.locator(':focus').textContent()).toBe('Jobs');
        await admin.keyboard.press('Enter');
        await admin.locator('#nav a[aria-current="page"][href="#/jobs"]').waitFor();
        await admin.getByLabel('Queue').focus();
        await admin.keyboard.type('mail');
        await admin.keyboard.press('Enter');
        await expect.poll(() => new URL(admin.url()).hash).toBe('#/jobs?queue=mail');
        // The page was drawn again from the address, the filter kept.
        await expect.poll(() => admin.getByLabel('Queue').inputValue()).toBe('mail');
      });

      it('runs a schedule now from the Schedules page: one job of its template is enqueued', async () => {
        const docket = server.server.docket;
        await docket.schedule({ id: 'hourly-sync', cron: '0 * * * *', job: { kind: 'sync.run', queue: 'sync' } });
        const planned = await docket.listJobs({ kind: 'sync.run' });
        await admin.goto(`${server.url}/#/schedules`);
        await admin.getByRole('button', { name: 'Run now: schedule hourly-sync' }).click();
        // Besides the planned run (its next slot), a one-off run due now, outside the plan.
        await expect.poll(async () => (await docket.listJobs({ kind: 'sync.run' })).length).toBe(planned.length + 1);
        const runNow = (await docket.listJobs({ kind: 'sync.run' })).filter((job) => job.scheduleId === null);
        expect(runNow).toMatchObject([{ queue: 'sync', state: 'pending' }]);
        expect(runNow[0]!.runAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
      });

      it('follows a job from pending to running to done on its page', async () => {
        const { id } = await server.server.docket.submit({
          kind: 'dash.work',
          queue: 'work',
          runAt: new Date(Date.now() + 2500).toISOString(),
        });
        await admin.goto(`${server.url}/#/jobs/${id}`);
        const state = admin.getByTestId('job-state');
        await expect.poll(() => state.textContent()).toBe('pending');
        await expect.poll(() => state.textContent(), { timeout: 15_000 }).toBe('running');
        releaseWork();
        await expect.poll(() => state.textContent(), { timeout: 15_000 }).toBe('done');
        expect((await server.server.docket.getJob(id))?.state).toBe('done');
        await screenshot(admin, `${kind}-job-done`);
      });

      it('shows a dead job with its error, and its Retry on the dead-letter page brings it back to done', async () => {
        const { id } = await server.server.docket.submit({ kind: 'dash.fail', queue: 'work', maxAttempts: 1 });
        await expect.poll(async () => (await server.server.docket.getJob(id))?.state, { timeout: 15_000 }).toBe('dead');
        await admin.goto(`${server.url}/#/jobs/${id}`);
        await expect.poll(() => admin.getByTestId('job-state').textContent()).toBe('dead');
        await admin.getByText(`payment declined ${XSS}`).first().waitFor();
        await admin.goto(`${server.url}/#/dead?queue=work`);
        failing = false;
        await admin.getByRole('button', { name: `Retry job ${id}` }).click();
        await expect.poll(async () => (await server.server.docket.getJob(id))?.state, { timeout: 15_000 }).toBe('done');
        await admin.goto(`${server.url}/#/jobs/${id}`);
        await expect.poll(() => admin.getByTestId('job-state').textContent()).toBe('done');
      });

      it('shows an XSS payload as text and never runs it', async () => {
        const page = await openSignedIn(browser, server, TOKENS.all.token);
        let dialogs = 0;
        page.on('dialog', (dialog) => {
          dialogs++;
          void dialog.dismiss();
        });
        const { id } = await server.server.docket.submit({ kind: 'xss.probe', queue: 'mail', payload: { note: XSS } });
        await page.goto(`${server.url}/#/jobs/${id}`);
        await expect.poll(() => page.getByTestId('payload').textContent()).toContain(XSS);
        await page.goto(`${server.url}/#/jobs?kind=xss.probe`);
        await page.getByRole('link', { name: id, exact: true }).waitFor();
        await page.goto(`${server.url}/#/dead?queue=work`);
        expect(await page.locator('img').count()).toBe(0);
        expect(dialogs).toBe(0);
        await page.close();
      });

      it('gives a read token everything to see and nothing to do', async () => {
        const page = await openSignedIn(browser, server, TOKENS.read.token, '#/queues');
        await page.getByRole('link', { name: 'mail', exact: true }).waitFor();
        expect(await page.getByRole('button', { name: /^(Pause|Resume) queue/ }).count()).toBe(0);
        await page.goto(`${server.url}/#/dead`);
        await page.getByText('Read-only token: actions are hidden.').waitFor();
        expect(await page.getByRole('button', { name: /Retry|Purge|Select all/ }).count()).toBe(0);
        await page.goto(`${server.url}/#/schedules`);
        await page.getByText('nightly-report').waitFor();
        expect(await page.getByRole('button', { name: /Pause|Resume|Run/ }).count()).toBe(0);
        // Hidden is not the protection: the API refuses the read token's write from this very page.
        const status = await page.evaluate(async (token) => {
          const response = await fetch('/v1/queues/mail/pause', {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: '{}',
          });
          return response.status;
        }, TOKENS.read.token);
        expect(status).toBe(403);
        expect((await server.server.docket.listQueues()).find((q) => q.name === 'mail')?.paused ?? false).toBe(false);
        await page.close();
      });

      it('pauses a queue from the Queues page and claims stop until it is resumed', async () => {
        const docket = server.server.docket;
        await admin.goto(`${server.url}/#/queues`);
        // The queue exists once a job names it; the earlier tests ran jobs on it.
        await admin.getByRole('button', { name: 'Pause queue work' }).click();
        await admin.getByRole('button', { name: 'Resume queue work' }).waitFor();
        expect((await docket.listQueues()).find((q) => q.name === 'work')?.paused).toBe(true);
        const held = await docket.submit({ kind: 'dash.work', queue: 'work' });
        // The same worker keeps claiming elsewhere: a job on another queue it serves gets done...
        const other = await docket.submit({ kind: 'dash.work', queue: 'other' });
        await expect.poll(async () => (await docket.getJob(other.id))?.state, { timeout: 15_000 }).toBe('done');
        const second = await docket.submit({ kind: 'dash.work', queue: 'other' });
        await expect.poll(async () => (await docket.getJob(second.id))?.state, { timeout: 15_000 }).toBe('done');
        // ...while the paused queue's job, due before both, was never claimed.
        expect(await docket.getJob(held.id)).toMatchObject({ state: 'pending', attempts: 0 });
        await admin.getByRole('button', { name: 'Resume queue work' }).click();
        await expect.poll(async () => (await docket.getJob(held.id))?.state, { timeout: 15_000 }).toBe('done');
      });

      it(`bulk-retries ${BULK_COUNT.toLocaleString('en')} dead letters with a progress bar that reaches 100 %, and the store agrees`, async () => {
        const docket = server.server.docket;
        // One real dead letter (a handler that always fails), copied with SQL onto a queue no worker serves.
        const { id: templateId } = await docket.submit({
          kind: 'dash.doomed',
          queue: 'work',
          maxAttempts: 1,
          payload: { n: 1 },
        });
        await expect.poll(async () => (await docket.getJob(templateId))?.state, { timeout: 15_000 }).toBe('dead');
        await seedDeadCopies(server, templateId, BULK_COUNT, 50_000_000);
        expect(await countRows(server, "SELECT count(*) AS n FROM dead_jobs WHERE queue = 'bulk'")).toBe(BULK_COUNT);

        await admin.goto(`${server.url}/#/dead?queue=bulk`);
        await admin.getByRole('link', { name: '50000000', exact: true }).waitFor();
        // The reschedule time is asked for only when that is the action.
        expect(await admin.getByLabel('New run time (reschedule)').isVisible()).toBe(false);
        await admin.getByRole('button', { name: 'Select all matching…' }).click();
        const dialog = admin.getByRole('dialog');
        await expect
          .poll(() => dialog.getByRole('heading').textContent())
          .toBe(`Retry ${BULK_COUNT.toLocaleString('en-US')} dead letters?`);
        await screenshot(admin, `${kind}-bulk-confirm`);
        await dialog.getByRole('button', { name: `Retry ${BULK_COUNT.toLocaleString('en-US')}` }).click();
        await admin.locator('[data-operation]').waitFor();
        // A reload while it runs: the page finds the operation again by its remembered id.
        await admin.reload();
        const summary = admin.getByTestId('bulk-summary');
        await summary.waitFor({ timeout: 90_000 });
        expect(await summary.textContent()).toContain(`${BULK_COUNT.toLocaleString('en-US')} dead letters retried`);
        expect(await admin.locator('progress').getAttribute('value')).toBe('100');
        await screenshot(admin, `${kind}-bulk-done`);
        expect(await countRows(server, "SELECT count(*) AS n FROM dead_jobs WHERE queue = 'bulk'")).toBe(0);
        expect(
          await countRows(server, "SELECT count(*) AS n FROM jobs WHERE queue = 'bulk' AND state = 'pending'"),
        ).toBe(BULK_COUNT);
      }, 150_000);
    },
  );
}

/**
 * The overview on a server that keeps no done records (`--retention-ms 0`, decision 0022): a job
 * runs and is deleted as it completes, Done stays 0, and the page says why instead of looking
 * as if nothing ever finished.
 */
export function noDoneRecordsSuite(kind: StoreKind): void {
  const missing = browserMissingReason();
  describe.skipIf(missing !== undefined)(
    `dashboard keeping no done records in chromium on ${kind}${missing ? ` (skipped: ${missing})` : ''}`,
    () => {
      let server: TestServer;
      let browser: TestBrowser;
      let worker: Worker;

      beforeAll(async () => {
        server = await startTestServer({ kind, tokens: [TOKENS.all], flags: { retentionMs: '0' } });
        const docket = server.server.docket;
        docket.handle('lean.k', async () => {});
        worker = docket.worker({ queues: ['lean'], pollIntervalMs: 100 });
        await worker.start();
        browser = await launchBrowser();
      });
      afterAll(async () => {
        await worker?.stop();
        await browser?.close();
        await server?.stop();
      });

      it('says done jobs are not kept, and counts none done after a job ran', async () => {
        const docket = server.server.docket;
        const completed = new Promise<string>((resolve) => docket.events.on('completed', (e) => resolve(e.job.id)));
        // A job due in an hour keeps the queue's row on the page after the other ran and went.
        await docket.submit({ kind: 'lean.k', queue: 'lean', runAt: new Date(Date.now() + 3_600_000) });
        const { id } = await docket.submit({ kind: 'lean.k', queue: 'lean' });
        expect(await completed).toBe(id);
        expect(await docket.getJob(id)).toBeNull();
        const page = await openSignedIn(browser, server, TOKENS.all.token);
        const note = page.locator('[data-note="no-done-records"]');
        await note.waitFor();
        expect(await note.textContent()).toMatch(/^Done jobs are not kept \(retentionMs 0\)/);
        const row = page.locator('tr', { has: page.getByRole('link', { name: 'lean', exact: true }) });
        expect(await row.locator('[data-state="scheduled"]').textContent()).toMatch(/^1\b/);
        expect(await row.locator('[data-state="done"]').textContent()).toMatch(/^0\b/);
        expect(JSON.stringify(await seriousViolations(page), null, 1)).toBe('[]');
        await page.close();
      });
    },
  );
}
