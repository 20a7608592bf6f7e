/**
 * The documentation is checked like code: every relative link in README.md and docs/ resolves to a
 * file (and, for a `#fragment`, to a heading there), no document cites a design document outside
 * the repository (docs/design.md is ours), every `npm run` script a document names exists, the
 * README's quick start is the two commands CI runs, every guide is linked from the README, and the
 * README's five-minute path runs as written.
 *
 * The five-minute path runs the README's own code blocks, unedited, in a fresh directory. Only
 * `npm install docket` is replaced: the directory gets a `docket` package that re-exports this
 * checkout's source, and `npx docket` runs this checkout's CLI, so the test needs no network and no
 * build, yet fails the moment the README and the code disagree.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, type RunningCli, startDocket } from '../cli/run-docket.js';

/** README.md plus every Markdown file under docs/, as repository-relative paths. */
function documents(): string[] {
  const found = ['README.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(REPO_ROOT, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found.sort();
}

function read(path: string): string {
  return readFileSync(join(REPO_ROOT, path), 'utf8');
}

/** The text outside fenced code blocks, with inline code spans blanked (links there are examples). */
function prose(markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '')
    .replace(/`[^`\n]*`/g, (span) => ' '.repeat(span.length));
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  const withoutCode = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const match of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = (match[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

interface Link {
  document: string;
  target: string;
}

function relativeLinks(): Link[] {
  const links: Link[] = [];
  for (const document of documents()) {
    for (const match of prose(read(document)).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
      links.push({ document, target });
    }
  }
  return links;
}

/** Where a link points, or why it does not resolve. */
function brokenReason({ document, target }: Link): string | null {
  const [pathPart = '', fragment] = target.split('#', 2);
  const file = pathPart === '' ? join(REPO_ROOT, document) : resolve(dirname(join(REPO_ROOT, document)), pathPart);
  if (!file.startsWith(REPO_ROOT)) return 'points outside the repository';
  if (!existsSync(file)) return `no such file: ${relative(REPO_ROOT, file)}`;
  if (fragment === undefined) return null;
  if (!file.endsWith('.md') || statSync(file).isDirectory()) return 'an anchor into a file that is not Markdown';
  if (!anchors(readFileSync(file, 'utf8')).has(fragment)) {
    return `no heading #${fragment} in ${relative(REPO_ROOT, file)}`;
  }
  return null;
}

describe('links in README.md and docs/', () => {
  it('finds the links it checks (the extractor is not blind)', () => {
    const links = relativeLinks();
    expect(links.length).toBeGreaterThan(40);
    expect(links).toContainEqual({ document: 'README.md', target: 'docs/library.md' });
  });

  it('resolves every relative link to an existing file and heading', () => {
    const broken = relativeLinks()
      .map((link) => ({ link, reason: brokenReason(link) }))
      .filter(({ reason }) => reason !== null)
      .map(({ link, reason }) => `${link.document}: (${link.target}) ${reason}`);
    expect(broken).toEqual([]);
  });

  it('refuses a link to a missing file or heading (the checker can fail)', () => {
    expect(brokenReason({ document: 'README.md', target: 'docs/no-such-guide.md' })).toMatch(/no such file/);
    expect(brokenReason({ document: 'docs/cli.md', target: 'library.md#no-such-heading' })).toMatch(/no heading/);
    expect(brokenReason({ document: 'docs/cli.md', target: 'library.md#worker-options' })).toBeNull();
  });

  it('links every guide in docs/ from the README', () => {
    const linked = new Set(
      relativeLinks()
        .filter((link) => link.document === 'README.md')
        .map((link) => link.target.split('#')[0]),
    );
    const guides = readdirSync(join(REPO_ROOT, 'docs')).filter((name) => name.endsWith('.md'));
    expect(guides).toEqual(expect.arrayContaining(['library.md', 'cli.md', 'http-api.md', 'operations.md']));
    expect(guides.filter((name) => !linked.has(`docs/${name}`))).toEqual([]);
  });
});

/**
 * Phrases that cite a document outside the repository: a design other than docs/design.md, the
 * upper-case RELIABILITY.md that docs/reliability.md replaces, or a path on a developer's machine.
 */
const OUTSIDE_DESIGN = [
  /\bthe design\b(?!\.md)/i,
  /\bdesign(?:'s|’s)\b/i,
  /\bdesign doc(?:ument)?s?\b/i,
  /job-scheduler-design/i,
  /\bRELIABILITY\.md\b/,
  /\/work\/shared\b/,
];

function outsideDesignCitations(path: string): string[] {
  return read(path)
    .split('\n')
    .flatMap((line, index) =>
      OUTSIDE_DESIGN.some((pattern) => pattern.test(line)) ? [`${path}:${index + 1}: ${line.trim()}`] : [],
    );
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('design citations', () => {
  it('cites no outside document (design.md and reliability.md are ours), in the docs or in src/', () => {
    const citations = [...documents(), ...sourceFiles('src')].flatMap(outsideDesignCitations);
    expect(citations).toEqual([]);
  });

  it('flags the phrasings it is meant to catch', () => {
    const flagged = (line: string) => OUTSIDE_DESIGN.some((pattern) => pattern.test(line));
    expect(flagged("exactly as in the design's reference model")).toBe(true);
    expect(flagged('see the design document')).toBe(true);
    expect(flagged('(RELIABILITY.md fault class 5)')).toBe(true);
    expect(flagged('(docs/reliability.md, fault class 5)')).toBe(false);
    expect(flagged('as in [design.md](design.md#the-reference-model)')).toBe(false);
    expect(flagged('a second lease by design')).toBe(false);
  });
});

const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;

describe('commands the docs give', () => {
  it('keeps the README quick start: `npm ci && npm run demo` and `npm test`', () => {
    const quickStart = /## Quick start\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(read('README.md'))?.[1] ?? '';
    const commands = quickStart
      .split('\n')
      .map((line) => line.replace(/#.*$/, '').trim())
      .filter(Boolean);
    expect(commands).toEqual(['npm ci && npm run demo', 'npm test']);
    expect(scripts.demo).toBeDefined();
    expect(scripts.test).toBeDefined();
  });

  it('names only npm scripts that exist', () => {
    const missing = documents().flatMap((document) =>
      [...read(document).matchAll(/\bnpm run ([A-Za-z0-9:_-]+)/g)]
        .map((match) => match[1] ?? '')
        .filter((name) => !(name in scripts))
        .map((name) => `${document}: npm run ${name}`),
    );
    expect(missing).toEqual([]);
  });
});

/** Splits one shell command line into words (single and double quotes, no expansion). */
function shellWords(line: string): string[] {
  const words: string[] = [];
  for (const match of line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) words.push(match[1] ?? match[2] ?? match[3] ?? '');
  return words;
}

/** The fenced block of `language` that follows the first line containing `marker`. */
function blockAfter(markdown: string, marker: string, language: string): string {
  const start = markdown.indexOf(marker);
  expect(start, `README has "${marker}"`).toBeGreaterThanOrEqual(0);
  const block = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(markdown.slice(start));
  expect(block, `a ${language} block after "${marker}"`).not.toBeNull();
  return block?.[1] ?? '';
}

function commandLines(block: string): string[] {
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#\s.*$/, '').trim())
    .filter(Boolean);
}

/** Resolves once `cli` has printed `text` on stdout; rejects, with its stderr, if it exits first or takes 30 s. */
function printed(cli: RunningCli, text: string): Promise<void> {
  return new Promise((resolvePrinted, reject) => {
    const fail = (why: string) => {
      stop();
      const { stdout, stderr } = cli.output();
      reject(new Error(`${why} before printing "${text}"\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    };
    const check = () => {
      if (!cli.output().stdout.includes(text)) return;
      stop();
      resolvePrinted();
    };
    const onClose = () => fail('the process exited');
    const timer = setTimeout(() => fail('30 s passed'), 30_000);
    const stop = () => {
      clearTimeout(timer);
      cli.child.stdout?.off('data', check);
      cli.child.off('close', onClose);
    };
    cli.child.stdout?.on('data', check);
    cli.child.once('close', onClose);
    check();
  });
}

describe("the README's five-minute path", () => {
  const directory = mkdtempSync(join(tmpdir(), 'docket-readme-'));
  const running: RunningCli[] = [];

  afterAll(() => {
    for (const cli of running) if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
    rmSync(directory, { recursive: true, force: true });
  });

  // Resolved here: from the temporary directory a bare `--import tsx` would find no tsx.
  const tsx = import.meta.resolve('tsx');

  /** Runs a README command in the directory: `node <file>` or `npx docket …`. */
  function start(line: string): RunningCli {
    const [program, ...args] = shellWords(line);
    if (program === 'npx' && args[0] === 'docket') {
      return startDocket(args.slice(1), {
        cwd: directory,
        entry: ['--import', tsx, join(REPO_ROOT, 'src/cli/main.ts')],
      });
    }
    if (program === 'node' && args.length === 1) {
      return startDocket([], { cwd: directory, entry: ['--import', tsx, join(directory, args[0] ?? '')] });
    }
    throw new Error(`the five-minute path has a command this test does not know how to run: ${line}`);
  }

  it('runs as written: install, a worker, a producer, then the CLI', async () => {
    const readme = read('README.md');
    const install = commandLines(blockAfter(readme, 'In an empty directory', 'sh'));
    expect(install).toEqual(['npm init -y', 'npm pkg set type=module', 'npm install docket']);
    // `npm init -y` and `npm pkg set type=module` leave a package.json whose type is module.
    writeFileSync(join(directory, 'package.json'), JSON.stringify({ name: 'hello-docket', type: 'module' }));
    // `npm install docket`: a package that re-exports this checkout's source.
    const shim = join(directory, 'node_modules', 'docket');
    mkdirSync(shim, { recursive: true });
    writeFileSync(
      join(shim, 'package.json'),
      JSON.stringify({ name: 'docket', type: 'module', exports: './index.js' }),
    );
    writeFileSync(
      join(shim, 'index.js'),
      `export * from ${JSON.stringify(pathToFileURL(join(REPO_ROOT, 'src/index.ts')).href)};\n`,
    );

    writeFileSync(join(directory, 'worker.js'), blockAfter(readme, '(`worker.js`)', 'js'));
    writeFileSync(join(directory, 'submit.js'), blockAfter(readme, '(`submit.js`)', 'js'));

    const steps = commandLines(blockAfter(readme, 'Start the worker in one terminal', 'sh'));
    expect(steps[0]).toBe('node worker.js');
    expect(steps[1]).toBe('node submit.js');

    const worker = start(steps[0] ?? '');
    running.push(worker);
    await printed(worker, 'worker running');

    const submitted = await start(steps[1] ?? '').exited;
    expect(submitted).toMatchObject({ code: 0 });
    expect(submitted.stdout).toMatch(/^job 1 is due at \d{4}-\d\d-\d\dT/);
    await printed(worker, 'hello, Ada (job 1, attempt 1)');

    const cli = steps.slice(2);
    expect(cli.length).toBeGreaterThanOrEqual(3);
    const outputs: string[] = [];
    for (const line of cli) {
      const result = await start(line).exited;
      expect(result.code, `${line}\n${result.stderr}`).toBe(0);
      outputs.push(result.stdout);
    }
    // jobs show 1, then submit (prints the new id), then stats (a row for the default queue).
    expect(outputs[0]).toMatch(/state:\s+done/);
    expect(outputs[1]?.trim()).toBe('2');
    expect(outputs[2]).toMatch(/^default\s/m);
    await printed(worker, 'hello, Grace (job 2, attempt 1)');

    worker.child.kill('SIGINT'); // the README's Ctrl-C
    expect((await worker.exited).code).toBe(0);
  });
});
