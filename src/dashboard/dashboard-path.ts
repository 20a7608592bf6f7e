/**
 * The dashboard's mount path: one parser shared by `createApp`, `docket serve`'s
 * `--dashboard-path` / `$DOCKET_DASHBOARD_PATH` / `dashboardPath` and the tests, so every face
 * accepts and refuses the same values with the same message.
 */

/** Where the dashboard is served by default: the root of the app. */
export const DEFAULT_DASHBOARD_PATH = '/';

/** Words that turn the dashboard off (flags and variables are text). */
const OFF_WORDS = new Set(['off', 'false', 'none', 'disabled']);

/** A path of plain segments: the API lives under /v1, /health and /metrics, so those are refused. */
const PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)*\/?$/;
const RESERVED = ['/v1', '/health', '/ready', '/metrics', '/openapi.json'];

/**
 * Reads a dashboard path: `'/'`, `'/ops'`, `'/ops/'` (normalized to no trailing slash except
 * the root), or `false` / `"off"` for no dashboard. Returns the reason as text when refused.
 */
export function parseDashboardPath(value: unknown): { path: string | false } | { error: string } {
  if (value === false) return { path: false };
  if (typeof value !== 'string') {
    return { error: `must be a path such as "/" or "/dashboard", or false ("off") for none, got ${typeof value}` };
  }
  const trimmed = value.trim();
  if (OFF_WORDS.has(trimmed.toLowerCase())) return { path: false };
  if (!PATH_PATTERN.test(trimmed) || trimmed === '' || trimmed.includes('/./') || /\/\.\.?(\/|$)/.test(trimmed)) {
    return {
      error: `must be a path of letters, digits and . _ ~ - segments starting with "/", or "off", got ${JSON.stringify(value.slice(0, 100))}`,
    };
  }
  const path = trimmed.length > 1 ? trimmed.replace(/\/$/, '') : trimmed;
  const clash = RESERVED.find((reserved) => path === reserved || path.startsWith(`${reserved}/`));
  if (clash !== undefined) return { error: `must not be under ${clash}, which the API serves` };
  return { path };
}
