#!/usr/bin/env node
/**
 * Checks the package a user would get from npm, not the source tree: builds, `npm pack`s, lints the
 * tarball with publint and @arethetypeswrong/cli, installs it into fresh temporary projects and
 * uses it there the way the README says (import, require, the `docket` binary, strict `tsc`,
 * a TypeScript handlers module, SIGTERM through `npx`, a PostgreSQL-only install without the
 * optional better-sqlite3). Every step is timed; the script exits non-zero when any step failed.
 *
 * Installs come from the npm cache where possible (`--prefer-offline`). The full install runs no
 * install scripts and copies the repository's compiled better-sqlite3 addon (same version, same
 * Node) instead of compiling it again, which takes two to three minutes here; `--compile` (or
 * DOCKET_PACKAGE_CHECK_COMPILE=1) compiles it as a user's install would.
 *
 * Usage: node scripts/check-package.mjs [--keep] [--compile]   (--keep leaves the temporary projects in place)
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
/** Compile better-sqlite3 in the fresh project as a user's install would, instead of copying the repository's build. */
const compile = process.argv.includes('--compile') || process.env.DOCKET_PACKAGE_CHECK_COMPILE === '1';
const work = mkdtempSync(join(tmpdir(), 'docket-package-'));
const postgresUrl = process.env.DOCKET_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const npmInstall = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--no-package-lock'];

/** @type {{ name: string, ok: boolean, ms: number, detail?: string }[]} */
const results = [];
let tarball = '';

/** Runs a command; resolves with its output, rejects with a message that includes it on a non-zero exit. */
function run(command, args, options = {}) {
  const result = spawnSync(command, args, {
    cwd: options.cwd ?? repo,
    env: { ...process.env, ...options.env },
    encoding: 'utf8',
    input: options.input,
    timeout: options.timeoutMs ?? 300_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  const expected = options.expectStatus ?? 0;
  if (result.status !== expected) {
    throw new Error(
      `${command} ${args.join(' ')} exited ${result.status ?? result.signal} (expected ${expected})\n${output.trim()}`,
    );
  }
  return { stdout: result.stdout ?? '', stderr: result.stderr ?? '', output };
}

/** Runs one named step, timing it; a failure is recorded and the next steps still run. */
async function step(name, body) {
  const started = Date.now();
  try {
    await body();
    results.push({ name, ok: true, ms: Date.now() - started });
    console.log(`ok   ${name} (${seconds(Date.now() - started)})`);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    results.push({ name, ok: false, ms: Date.now() - started, detail });
    console.log(`FAIL ${name} (${seconds(Date.now() - started)})\n${indent(detail)}`);
  }
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

function indent(text) {
  return text
    .split('\n')
    .slice(0, 60)
    .map((line) => `     ${line}`)
    .join('\n');
}

function assert(condition, message) {
  if (!condition) throw new Error(message);
}

/** A fresh consumer project: CommonJS by default (package.json without "type"), so .js is CJS and .mjs is ESM. */
function createProject(name) {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name, version: '1.0.0', private: true }, null, 2)}\n`);
  return dir;
}

/** Where the counts go for ci-summary.mjs, which folds each step into CI's closing line as one test. */
const reportPath = join(repo, '.package-check-report.json');
rmSync(reportPath, { force: true });
/** dist/ is built for packing only; a checkout that had none gets none back (bin/ prefers dist/ when present). */
const hadDist = existsSync(join(repo, 'dist'));

const app = createProject('app');
const pgOnly = createProject('postgres-only');

await step('build (npm run build, from a clean dist/)', () => {
  rmSync(join(repo, 'dist'), { recursive: true, force: true });
  run('npm', ['run', 'build']);
});

await step('npm pack', () => {
  const { stdout } = run('npm', ['pack', '--json', '--pack-destination', work]);
  const [packed] = JSON.parse(stdout);
  tarball = join(work, packed.filename);
  const files = packed.files.map((file) => file.path);
  for (const required of ['LICENSE', 'package.json', 'bin/docket.js', 'dist/index.js', 'dist/http/index.d.ts']) {
    assert(files.includes(required), `the tarball lacks ${required}`);
  }
  const tests = files.filter((file) => /\.test\.[cm]?[jt]s$/.test(file));
  assert(tests.length === 0, `the tarball ships test files: ${tests.join(', ')}`);
});

await step('publint (strict) on the tarball', () => {
  run('npx', ['publint', 'run', tarball, '--strict']);
});

// attw's one remaining warning, CJSResolvesToESM, describes Node before 20.19 and TypeScript before
// `module: node20`/`nodenext` learned require(esm); engines say >=20.19, and the `require` checks
// below prove both the runtime and a current compiler accept require('docket').
await step('@arethetypeswrong/cli on the tarball (cjs-resolves-to-esm ignored: require(esm), Node >=20.19)', () => {
  run('npx', ['attw', tarball, '--ignore-rules', 'cjs-resolves-to-esm']);
});

await step(
  `install the tarball into a fresh project (${compile ? 'compiling' : 'reusing the repository build of'} better-sqlite3)`,
  () => {
    // The repository's own TypeScript and Node types, at their exact versions, so npm finds them in its cache.
    const typescript = `typescript@${installedVersion('typescript')}`;
    const nodeTypes = `@types/node@${installedVersion('@types/node')}`;
    const scripts = compile ? [] : ['--ignore-scripts'];
    run('npm', [...npmInstall, ...scripts, tarball, typescript, nodeTypes], { cwd: app, timeoutMs: 600_000 });
    const installed = join(app, 'node_modules', 'better-sqlite3');
    assert(existsSync(installed), 'the optional better-sqlite3 was not installed');
    if (!compile) {
      // Same package version, same Node: the addon `npm ci` compiled for the repository is the one a
      // compile here would produce, and copying it saves a couple of minutes of CI.
      const version = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version;
      assert(version === installedVersion('better-sqlite3'), `better-sqlite3 ${version} differs from the repository's`);
      const addon = join('build', 'Release', 'better_sqlite3.node');
      mkdirSync(join(installed, 'build', 'Release'), { recursive: true });
      cpSync(join(repo, 'node_modules', 'better-sqlite3', addon), join(installed, addon));
    }
  },
);

await step('every shipped source map points at a shipped source file', () => {
  const root = join(app, 'node_modules', 'docket', 'dist');
  let maps = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.map')) {
        maps += 1;
        const map = JSON.parse(readFileSync(path, 'utf8'));
        for (const source of map.sources) {
          const target = resolve(dirname(path), map.sourceRoot ?? '', source);
          assert(existsSync(target), `${path} names ${source}, which is not in the package`);
        }
      }
    }
  };
  walk(root);
  assert(maps > 0, 'no source maps shipped');
});

const sampleJob = `
  const dir = require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'docket-sample-'));
  const docket = await Docket.open({ url: 'sqlite:' + dir + '/jobs.db' });
  let seen = null;
  docket.handle('sample.add', async (payload) => { seen = payload.a + payload.b; });
  const { id } = await docket.submit({ kind: 'sample.add', payload: { a: 2, b: 3 } });
  const worker = docket.worker({ concurrency: 1 });
  await worker.start();
  const deadline = Date.now() + 20000;
  while ((await docket.getJob(id))?.state !== 'done') {
    if (Date.now() > deadline) throw new Error('the sample job did not finish');
    await new Promise((r) => setTimeout(r, 50));
  }
  await worker.stop();
  await docket.close();
  if (seen !== 5) throw new Error('handler saw ' + seen);
`;

await step("import('docket') and 'docket/http' from ESM run a job on SQLite", () => {
  writeFileSync(
    join(app, 'esm-sample.mjs'),
    `import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\n` +
      `import { Docket } from 'docket';\nimport { createApp } from 'docket/http';\n` +
      `if (typeof createApp !== 'function') throw new Error('docket/http has no createApp');\n${sampleJob}\nconsole.log('esm ok');\n`,
  );
  const { stdout } = run(process.execPath, ['esm-sample.mjs'], { cwd: app, timeoutMs: 60_000 });
  assert(stdout.includes('esm ok'), `unexpected output: ${stdout}`);
});

await step('the dashboard is served from the compiled modules of the package (no TypeScript at run time)', () => {
  // The page's modules must be the .js that npm run build compiled (a user's install has no
  // TypeScript to compile them with): the package ships them, and they are what is served.
  const compiled = join(app, 'node_modules', 'docket', 'dist', 'dashboard', 'client', 'main.js');
  assert(existsSync(compiled), 'the package has no dist/dashboard/client/main.js');
  const expected = readFileSync(compiled, 'utf8').replace(/\n\/\/# sourceMappingURL=.*$/, '');
  writeFileSync(
    join(app, 'dashboard-sample.mjs'),
    `import { Docket } from 'docket';\nimport { createApp } from 'docket/http';\n` +
      `const docket = await Docket.open({ url: 'sqlite::memory:' });\nconst app = createApp(docket);\n` +
      `const page = await app.request('http://127.0.0.1/', { headers: { host: '127.0.0.1' } });\n` +
      `const html = await page.text();\nconst main = html.match(/assets\\/[0-9a-f]+\\/main\\.js/)?.[0];\n` +
      `if (page.status !== 200 || !main) throw new Error('no dashboard page: ' + page.status);\n` +
      `if (!page.headers.get('content-security-policy')?.includes("default-src 'self'")) throw new Error('no CSP');\n` +
      `for (const name of ['main.js', 'api.js', 'style.css']) {\n` +
      `  const asset = await app.request('http://127.0.0.1/' + main.replace('main.js', name), { headers: { host: '127.0.0.1' } });\n` +
      `  const body = await asset.text();\n` +
      `  if (asset.status !== 200 || body.length < 100) throw new Error(name + ': ' + asset.status);\n` +
      `  if (name.endsWith('.js') && /^export (interface|type) /m.test(body)) throw new Error(name + ' is not compiled');\n` +
      `}\nconst served = await (await app.request('http://127.0.0.1/' + main, { headers: { host: '127.0.0.1' } })).text();\n` +
      `if (served !== ${JSON.stringify(expected)}) throw new Error('main.js is not the compiled file of the package');\n` +
      `await app.close();\nawait docket.close();\nconsole.log('dashboard ok');\n`,
  );
  const { stdout } = run(process.execPath, ['dashboard-sample.mjs'], { cwd: app, timeoutMs: 60_000 });
  assert(stdout.includes('dashboard ok'), `unexpected output: ${stdout}`);
});

await step("require('docket') and require('docket/http') from CommonJS (require(esm))", () => {
  writeFileSync(
    join(app, 'cjs-sample.js'),
    `const { Docket } = require('docket');\nconst { startServer } = require('docket/http');\n` +
      `if (typeof startServer !== 'function') throw new Error('docket/http has no startServer');\n` +
      `(async () => {${sampleJob}\nconsole.log('cjs ok');\n})().catch((error) => { console.error(error); process.exit(1); });\n`,
  );
  const { stdout, stderr } = run(process.execPath, ['cjs-sample.js'], { cwd: app, timeoutMs: 60_000 });
  assert(stdout.includes('cjs ok'), `unexpected output: ${stdout}${stderr}`);
});

await step('npx docket --help', () => {
  const { stdout } = run('npx', ['docket', '--help'], { cwd: app });
  assert(/Usage: docket/.test(stdout) && /\bwork\b/.test(stdout), `unexpected help:\n${stdout}`);
});

await step('strict tsc on ESM and CommonJS samples using the API (module nodenext, skipLibCheck off)', () => {
  mkdirSync(join(app, 'types'), { recursive: true });
  writeFileSync(
    join(app, 'types', 'esm-sample.mts'),
    `import { Docket, ValidationError, type Job, type JobContext } from 'docket';
import { createApp, type ServerConfig } from 'docket/http';

interface Email { to: string }
const docket: Docket = await Docket.open({ url: 'sqlite::memory:', retentionMs: 60_000 });
docket.handle<Email>('email.send', async (payload: Email, ctx: JobContext) => {
  ctx.signal.throwIfAborted();
  payload.to.toUpperCase();
});
const submitted: { id: string; created: boolean } = await docket.submit({ kind: 'email.send', payload: { to: 'a@b.c' } });
const job: Job | null = await docket.getJob(submitted.id);
const state: string | undefined = job?.state;
const isValidation = (error: unknown): boolean => error instanceof ValidationError && error.field.length > 0;
const config: ServerConfig | undefined = undefined;
export { createApp, config, isValidation, state };
`,
  );
  writeFileSync(
    join(app, 'types', 'cjs-sample.cts'),
    `import docketModule = require('docket');
import http = require('docket/http');
export async function main(): Promise<string> {
  const docket = await docketModule.Docket.open({ url: 'sqlite::memory:' });
  await docket.close();
  return typeof http.startServer;
}
`,
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        skipLibCheck: false,
        noEmit: true,
        types: ['node'],
      },
      include: ['types/*.mts', 'types/*.cts'],
    }),
  );
  run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: app });
});

await step("tsc under node10 resolution resolves 'docket' and 'docket/http'", () => {
  writeFileSync(
    join(app, 'types', 'node10-sample.ts'),
    `import { Docket } from 'docket';\nimport { startServer } from 'docket/http';\nexport const names: string[] = [Docket.name, startServer.name];\n`,
  );
  writeFileSync(
    join(app, 'tsconfig.node10.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'commonjs',
        moduleResolution: 'node10',
        ignoreDeprecations: '6.0',
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        types: ['node'],
      },
      include: ['types/node10-sample.ts'],
    }),
  );
  run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.node10.json'], {
    cwd: app,
  });
});

// A handlers module with an enum: Node's own type stripping cannot run it, only a real loader can.
const handlersSource = `import { appendFileSync } from 'node:fs';
enum Mark { Done = 'done' }
export default {
  'sample.touch': async (payload: { file: string }): Promise<void> => {
    appendFileSync(payload.file, Mark.Done + '\\n');
  },
};
`;

await step('docket work --handlers x.ts without tsx: one clear line saying how', () => {
  writeFileSync(join(app, 'handlers.ts'), handlersSource);
  const { stderr } = run('npx', ['docket', 'work', '--handlers', 'handlers.ts', '--db', 'sqlite:notsx.db'], {
    cwd: app,
    expectStatus: 2,
    timeoutMs: 30_000,
  });
  const lines = stderr.trim().split('\n');
  assert(lines.length === 1, `expected one line on stderr, got ${lines.length}:\n${stderr}`);
  assert(/install tsx/.test(stderr) && /compile/.test(stderr), `the error does not say how to fix it: ${stderr}`);
});

await step('npm install tsx; docket work --handlers x.ts runs a job; SIGTERM to npx stops the worker', async () => {
  run('npm', [...npmInstall, `tsx@${installedVersion('tsx')}`], { cwd: app, timeoutMs: 300_000 });
  const db = `sqlite:${join(app, 'work.db')}`;
  const marker = join(app, 'handled.txt');
  run(
    'npx',
    ['docket', 'submit', '--db', db, '--kind', 'sample.touch', '--payload', JSON.stringify({ file: marker })],
    {
      cwd: app,
    },
  );
  const child = spawn('npx', ['docket', 'work', '--handlers', 'handlers.ts', '--db', db], {
    cwd: app,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise((resolveExit) => child.on('exit', (code, signal) => resolveExit({ code, signal })));
  const deadline = Date.now() + 30_000;
  while (!existsSync(marker)) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`the worker did not run the job within 30 s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(readFileSync(marker, 'utf8') === 'done\n', 'the handler wrote something unexpected');
  const descendants = processTree(child.pid);
  child.kill('SIGTERM');
  const timeout = new Promise((r) => setTimeout(() => r(null), 20_000));
  const outcome = await Promise.race([exited, timeout]);
  if (outcome === null) {
    for (const pid of [child.pid, ...descendants]) killQuietly(pid);
    throw new Error(`npx docket work was still running 20 s after SIGTERM:\n${output}`);
  }
  // npx itself dies of the signal; what matters is that the worker under it (npm runs it through
  // `sh -c`, which does not pass SIGTERM on) stops gracefully rather than running on as an orphan.
  const settled = Date.now() + 15_000;
  while (descendants.some(isAlive) && Date.now() < settled) await new Promise((r) => setTimeout(r, 100));
  const survivors = descendants.filter(isAlive);
  for (const pid of survivors) killQuietly(pid);
  assert(survivors.length === 0, `processes left running 15 s after SIGTERM: ${survivors.join(', ')}\n${output}`);
  assert(/worker stopped/.test(output), `the worker did not log a graceful stop:\n${output}`);
});

await step(
  'PostgreSQL-only install (--omit=optional): no better-sqlite3, PostgreSQL works, SQLite names the package',
  () => {
    run('npm', [...npmInstall, '--omit=optional', tarball], { cwd: pgOnly, timeoutMs: 300_000 });
    assert(!existsSync(join(pgOnly, 'node_modules', 'better-sqlite3')), 'better-sqlite3 was installed anyway');
    const schema = `pkgcheck_${process.pid}_${Date.now()}`;
    writeFileSync(
      join(pgOnly, 'sample.mjs'),
      `import { Docket } from 'docket';
const docket = await Docket.open({ url: ${JSON.stringify(postgresUrl)}, schema: ${JSON.stringify(schema)} });
const { id } = await docket.submit({ kind: 'pg.only', payload: 1 });
if ((await docket.getJob(id))?.kind !== 'pg.only') throw new Error('job not stored');
await docket.close();
const pg = (await import('pg')).default;
const client = new pg.Client({ connectionString: ${JSON.stringify(postgresUrl)} });
await client.connect();
await client.query('DROP SCHEMA IF EXISTS ${schema} CASCADE');
await client.end();
try {
  await Docket.open({ url: 'sqlite::memory:' });
  throw new Error('opened SQLite without better-sqlite3');
} catch (error) {
  console.log(JSON.stringify({ code: error.code, message: error.message }));
}
`,
    );
    const { stdout } = run(process.execPath, ['sample.mjs'], { cwd: pgOnly, timeoutMs: 60_000 });
    const refusal = JSON.parse(stdout.trim().split('\n').pop() ?? '{}');
    assert(refusal.code === 'missing_dependency', `unexpected refusal: ${stdout}`);
    assert(
      /better-sqlite3/.test(refusal.message) && /npm install better-sqlite3/.test(refusal.message),
      refusal.message,
    );
    const cli = run('npx', ['docket', 'submit', '--db', 'sqlite:x.db', '--kind', 'pg.only'], {
      cwd: pgOnly,
      expectStatus: 1,
    });
    assert(/better-sqlite3/.test(cli.stderr) && cli.stderr.trim().split('\n').length === 1, `CLI said: ${cli.output}`);
  },
);

/** The version of a package in the repository's node_modules. */
function installedVersion(name) {
  return JSON.parse(readFileSync(join(repo, 'node_modules', name, 'package.json'), 'utf8')).version;
}

/** The pids below `pid` (children, grandchildren …), read from /proc. */
function processTree(pid) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // The process ended while we looked.
    }
  }
  const found = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

function isAlive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function killQuietly(pid) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

if (!keep) rmSync(work, { recursive: true, force: true });
if (!hadDist) rmSync(join(repo, 'dist'), { recursive: true, force: true });
const failed = results.filter((result) => !result.ok);
writeFileSync(
  reportPath,
  `${JSON.stringify({ passed: results.length - failed.length, failed: failed.length, steps: results }, null, 2)}\n`,
);
const total = results.reduce((sum, result) => sum + result.ms, 0);
console.log(
  `package check: ${results.length - failed.length} of ${results.length} steps passed in ${seconds(total)}` +
    (keep ? ` (projects kept in ${work})` : ''),
);
process.exit(failed.length > 0 ? 1 : 0);
