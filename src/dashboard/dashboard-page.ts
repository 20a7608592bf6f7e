/**
 * The operator's dashboard as a Hono sub-app: one HTML page and its browser modules, served
 * under a path of the API's app (`/` by default), so it mounts wherever the API mounts
 * (`docket serve`, or a user's own Hono, Express or node:http server through `createApp`).
 *
 * The page is static: it holds no data and no secret. Everything it shows comes from the public
 * JSON API in the operator's browser, with the operator's token, so it can do nothing the API
 * would refuse. Its safety rests on three headers sent with every response here:
 * - a strict Content-Security-Policy (`default-src 'self'`, no inline script or style, no
 *   framing), so even a job payload that slipped into markup could not run;
 * - `X-Content-Type-Options: nosniff`, so a module is only ever run as the type it is served as;
 * - `Referrer-Policy: no-referrer`, so job ids in the page's address do not leak to links.
 *
 * Caching: the page itself is `no-cache` (it names the current asset version); the modules and
 * the style sheet live under `assets/<version>/`, where the version is a hash of their content,
 * so they are cached for a year and a new release can never meet a stale module.
 *
 * The browser modules are written in TypeScript (src/dashboard/client/). A built package serves
 * the `.js` that `npm run build` compiled beside them; run from source (tsx, `npm run demo --
 * --serve` on a fresh clone), there is no `.js`, and each module is compiled once, on first use,
 * with the TypeScript compiler's transpileModule: no separate build step, no bundler.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context, Hono } from 'hono';
import { DASHBOARD_STYLE } from './dashboard-style.js';

/** The policy sent with every dashboard response; the tests assert it word for word. */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const CLIENT_DIR = fileURLToPath(new URL('./client/', import.meta.url));
const MODULE_NAME = /^[a-z][a-z0-9-]*\.js$/;
const YEAR_SECONDS = 365 * 24 * 3600;

interface Asset {
  body: string;
  contentType: string;
}

interface AssetSet {
  version: string;
  assets: Map<string, Asset>;
}

/** Compiles a module's TypeScript source to a browser module (types stripped, ES2022 kept). */
async function transpile(name: string, source: string): Promise<string> {
  // Only when running from source: the published package ships the compiled `.js`.
  const ts = (await import('typescript')).default;
  const output = ts.transpileModule(source, {
    // A `.ts` name, or the compiler reads the source as JavaScript (`get<T>(…)` as comparisons).
    fileName: name.replace(/\.js$/, '.ts'),
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022, sourceMap: false },
  });
  return output.outputText;
}

/** Reads every client module (compiled `.js` when present, else its `.ts` compiled now). */
async function loadAssets(): Promise<AssetSet> {
  const assets = new Map<string, Asset>();
  const files = readdirSync(CLIENT_DIR);
  const names = new Set(
    files
      .filter((file) => (file.endsWith('.ts') && !file.endsWith('.d.ts')) || file.endsWith('.js'))
      .map((file) => file.replace(/\.ts$/, '.js')),
  );
  for (const name of [...names].sort()) {
    if (!MODULE_NAME.test(name)) continue;
    const compiled = join(CLIENT_DIR, name);
    const body = existsSync(compiled)
      ? readFileSync(compiled, 'utf8').replace(/\n\/\/# sourceMappingURL=.*$/, '')
      : await transpile(name, readFileSync(join(CLIENT_DIR, name.replace(/\.js$/, '.ts')), 'utf8'));
    assets.set(name, { body, contentType: 'text/javascript; charset=utf-8' });
  }
  assets.set('style.css', { body: DASHBOARD_STYLE, contentType: 'text/css; charset=utf-8' });
  const hash = createHash('sha256');
  for (const [name, asset] of assets) hash.update(name).update('\0').update(asset.body).update('\0');
  return { version: hash.digest('hex').slice(0, 16), assets };
}

let loading: Promise<AssetSet> | undefined;
/** The assets, read once per process (they do not change while it runs). */
function dashboardAssets(): Promise<AssetSet> {
  loading ??= loadAssets().catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
}

/** The page: a shell the modules fill in. `depth` is how many segments the path adds to the app's root. */
function pageHtml(version: string, depth: number): string {
  // The API is found relative to the page, so the app may itself be mounted under any prefix.
  const apiBase = depth === 0 ? './' : '../'.repeat(depth);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="docket-api-base" content="${apiBase}">
<title>Docket</title>
<link rel="stylesheet" href="assets/${version}/style.css">
<script type="module" src="assets/${version}/main.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<span class="brand">Docket</span>
<nav aria-label="Pages" id="nav"></nav>
<span id="live" class="live" role="status" aria-live="polite"></span>
</header>
<main id="main" tabindex="-1"><p>Loading…</p></main>
<noscript><p>The Docket dashboard needs JavaScript (ES modules).</p></noscript>
</body>
</html>
`;
}

/** Headers every dashboard response carries (see the overview above). */
function secure(c: Context): void {
  c.header('Content-Security-Policy', DASHBOARD_CSP);
  c.header('X-Content-Type-Options', 'nosniff');
  c.header('Referrer-Policy', 'no-referrer');
  c.header('X-Frame-Options', 'DENY');
}

/**
 * Registers the dashboard on `app` at `path` ('/' or '/something', as parseDashboardPath
 * returns it): the page at `path/` and its assets under `path/assets/`. The page's own URL must
 * end in a slash, as its links are relative (so any mount prefix works): the path without it is
 * redirected there. That holds for an app mounted in a user's Hono app too (`/docket` →
 * `docket/`), where only the wildcard route sees `/docket/`, so the page and assets are told
 * apart by what follows the matched prefix.
 */
// biome-ignore lint/suspicious/noExplicitAny: any app's environment; these routes read none of it.
export function mountDashboard(app: Hono<any>, path: string): void {
  const base = path === '/' ? '' : path;
  const depth = path === '/' ? 0 : path.split('/').length - 1;
  const page = async (c: Context) => {
    secure(c);
    const { version } = await dashboardAssets();
    c.header('Cache-Control', 'no-cache');
    return c.html(pageHtml(version, depth));
  };
  app.get(base === '' ? '/' : base, (c) => {
    if (c.req.path.endsWith('/')) return page(c);
    secure(c);
    c.header('Cache-Control', 'no-store');
    return c.redirect(`${c.req.path.split('/').at(-1)}/`, 308);
  });
  app.get(`${base}/*`, async (c, next) => {
    // The full path matched so far (a mount prefix included), without the wildcard.
    const prefix = c.req.routePath.replace(/\/\*$/, '');
    const rest = c.req.path.slice(prefix.length);
    if (rest === '/') return page(c);
    const asset = /^\/assets\/([^/]+)\/([^/]+)$/.exec(rest);
    if (asset === null) return next();
    secure(c);
    const { version, assets } = await dashboardAssets();
    const found = assets.get(asset[2] ?? '');
    if (found === undefined || asset[1] !== version) {
      c.header('Cache-Control', 'no-store');
      return c.text('no such dashboard asset (the page may be older than the server: reload it)', 404);
    }
    c.header('Content-Type', found.contentType);
    c.header('Cache-Control', `public, max-age=${YEAR_SECONDS}, immutable`);
    return c.body(found.body);
  });
}
