/**
 * A real browser for the dashboard tests: Debian's chromium (`/usr/bin/chromium`, installed by
 * .ci/run when missing) driven by playwright-core, never a downloaded browser. Locally a
 * missing chromium skips these tests with the reason; with CI=true it fails them.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/** Where Debian installs chromium. */
export const CHROMIUM_PATH = process.env.DOCKET_TEST_CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots of each page, kept as CI artefacts (gitignored). */
export const ARTIFACTS_DIR = join(process.cwd(), 'test-artifacts', 'dashboard');

/** Why the browser tests cannot run here, or undefined when they can. In CI a reason is a failure. */
export function browserMissingReason(
  path: string = CHROMIUM_PATH,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  if (existsSync(path)) return undefined;
  const reason = `chromium is not installed at ${path} (apt-get install -y chromium)`;
  if (env.CI === 'true') throw new Error(`${reason}; with CI=true the browser tests must run`);
  return reason;
}

/** A browser with a fresh profile, closed (and its profile deleted) by `close()`. */
export interface TestBrowser {
  context: BrowserContext;
  /** A new tab (its own sessionStorage), failing the test on any page error. */
  page(): Promise<Page>;
  close(): Promise<void>;
}

/** Launches chromium headless with a fresh --user-data-dir. */
export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'docket-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const errors: string[] = [];
  return {
    context,
    async page() {
      const page = await context.newPage();
      page.on('pageerror', (error) => errors.push(error.message));
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
      if (errors.length > 0) throw new Error(`the dashboard threw in the browser: ${errors.join('; ')}`);
    },
  };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** One axe-core violation, as the tests report it. */
export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * Runs axe-core in the page and returns its serious and critical violations. The script is
 * evaluated through the DevTools protocol, which the page's CSP does not govern: the CSP stays
 * on, as users get it.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    // Runs in the page: `axe` and `document` are the browser's globals.
    const scope = globalThis as unknown as {
      axe: { run(context: unknown): Promise<{ violations: unknown[] }> };
      document: unknown;
    };
    const result = await scope.axe.run(scope.document);
    return result.violations as { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => JSON.stringify(n.target)),
    }));
}

/** Saves a full-page screenshot as a test artefact. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS_DIR, `${name}.png`), fullPage: true });
}
