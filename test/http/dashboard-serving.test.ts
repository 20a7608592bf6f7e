import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/dashboard/dashboard-page.js';
import { parseDashboardPath } from '../../src/dashboard/dashboard-path.js';
import { Docket } from '../../src/docket.js';
import { createApp, loadServerConfig } from '../../src/http/server.js';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';
import { TOKENS } from './http-support.js';

describe('parseDashboardPath', () => {
  it('reads the root, a path (dropping a trailing slash) and the words that turn it off', () => {
    expect(parseDashboardPath('/')).toEqual({ path: '/' });
    expect(parseDashboardPath('/ops/')).toEqual({ path: '/ops' });
    expect(parseDashboardPath('/ops/board')).toEqual({ path: '/ops/board' });
    expect(parseDashboardPath('off')).toEqual({ path: false });
    expect(parseDashboardPath(false)).toEqual({ path: false });
  });

  it('refuses what is not a plain path, and the API’s own paths', () => {
    for (const bad of ['', 'ops', '/ops//x', '/a/../b', '/x?y', 42, true]) {
      expect(parseDashboardPath(bad), String(bad)).toHaveProperty('error');
    }
    expect(parseDashboardPath('/v1')).toEqual({ error: 'must not be under /v1, which the API serves' });
    expect(parseDashboardPath('/metrics/x')).toHaveProperty('error');
  });
});

describe('docket serve settings: dashboardPath', () => {
  it('comes from --dashboard-path or $DOCKET_DASHBOARD_PATH, "/" by default', () => {
    expect(loadServerConfig({}).dashboardPath).toBe('/');
    expect(loadServerConfig({ flags: { dashboardPath: '/ops' } }).dashboardPath).toBe('/ops');
    expect(loadServerConfig({ env: { DOCKET_DASHBOARD_PATH: 'off' } }).dashboardPath).toBe(false);
  });

  it('refuses a bad path naming the setting and its source', () => {
    expect(() => loadServerConfig({ flags: { dashboardPath: 'ops' } })).toThrow(
      /^dashboardPath \(from --dashboard-path\): must be a path/,
    );
    expect(() => loadServerConfig({ env: { DOCKET_DASHBOARD_PATH: '/v1/ui' } })).toThrow(
      'dashboardPath (from $DOCKET_DASHBOARD_PATH): must not be under /v1, which the API serves',
    );
  });
});

describe('the dashboard served by createApp', () => {
  let db: TestDatabase;
  let docket: Docket;
  const apps: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    docket = await Docket.open({ url: db.url });
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await docket?.close();
    await db?.drop();
  });
  const make = (dashboardPath?: string | false) => {
    const app = createApp(docket, { tokens: [TOKENS.all, TOKENS.read], dashboardPath });
    apps.push(app);
    return app;
  };
  const assetPath = (html: string, name: string) => {
    const version = /assets\/([0-9a-f]{16})\/main\.js/.exec(html)?.[1];
    expect(version).toBeDefined();
    return `assets/${version}/${name}`;
  };

  it('serves the page at / with the CSP and no-cache, its assets with their types for a year', async () => {
    const app = make();
    const page = await app.request('/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const html = await page.text();
    expect(html).toContain('<meta name="docket-api-base" content="./">');
    for (const [name, type] of [
      ['main.js', 'text/javascript; charset=utf-8'],
      ['jobs-page.js', 'text/javascript; charset=utf-8'],
      ['style.css', 'text/css; charset=utf-8'],
    ] as const) {
      const asset = await app.request(`/${assetPath(html, name)}`);
      expect(asset.status, name).toBe(200);
      expect(asset.headers.get('content-type')).toBe(type);
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
    }
    // Served compiled: no TypeScript syntax reaches the browser.
    const jobs = await (await app.request(`/${assetPath(html, 'jobs-page.js')}`)).text();
    expect(jobs).not.toMatch(/^export (interface|type) /m);
    expect(jobs).not.toContain('innerHTML');
    // An asset of another version (a page older than the server) is not served as this one.
    const stale = await app.request(`/${assetPath(html, 'main.js').replace(/[0-9a-f]{16}/, '0000000000000000')}`);
    expect(stale.status).toBe(404);
    expect(stale.headers.get('cache-control')).toBe('no-store');
    expect((await app.request(`/${assetPath(html, 'nope.js')}`)).status).toBe(404);
  });

  it('moves to another path (redirecting the path without its slash), or is off', async () => {
    const moved = make('/ops');
    expect((await moved.request('/')).status).toBe(404);
    const redirect = await moved.request('/ops');
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('ops/');
    const html = await (await moved.request('/ops/')).text();
    expect(html).toContain('<meta name="docket-api-base" content="../">');
    expect((await moved.request(`/ops/${assetPath(html, 'main.js')}`)).status).toBe(200);
    const off = make(false);
    expect((await off.request('/')).status).toBe(404);
    // Unknown paths stay the API's JSON 404, beside the dashboard too.
    expect(await (await moved.request('/ops/nope')).json()).toMatchObject({ error: { code: 'not_found' } });
    expect(await (await make().request('/nope')).json()).toMatchObject({ error: { code: 'not_found' } });
    expect(() => make('/v1/board')).toThrow('dashboardPath: must not be under /v1, which the API serves');
  });

  it('mounts inside a user’s Hono app with the API, found relative to the page', async () => {
    const host = new Hono();
    host.route('/docket', make());
    const redirect = await host.request('/docket');
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('docket/');
    const page = await host.request('/docket/');
    expect(page.status).toBe(200);
    const html = await page.text();
    expect((await host.request(`/docket/${assetPath(html, 'main.js')}`)).status).toBe(200);
    // The page's API base "./" resolves, from /docket/, to the mounted API.
    const api = new URL('./v1/whoami', new URL('http://x/docket/'));
    const whoami = await host.request(api.pathname, { headers: { authorization: `Bearer ${TOKENS.read.token}` } });
    expect(whoami.status).toBe(200);
    expect(await whoami.json()).toEqual({ name: 'reader', scopes: ['read'], authenticated: true });
    expect((await host.request('/docket/v1/whoami')).status).toBe(401);
  });
});
