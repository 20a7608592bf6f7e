/**
 * The chaos harness's own PostgreSQL cluster. The harness restarts its database with
 * `-m immediate` and terminates its backends; doing that to the main cluster (port 5432) would
 * break every other test running on this machine, so the harness creates, starts and restarts a
 * separate cluster (`15 chaos` on port 5433 by default) and never touches any other.
 *
 * `ensureChaosCluster` is idempotent and works on a fresh machine (CI runs as root): it creates
 * the cluster with trust authentication when missing and starts it when down. Other tests make
 * their own cluster the same way under another name and port ({@link ChaosClusterOptions}: the
 * partition test's listens on a veth address too, with its own keepalive settings), and
 * `dropChaosCluster` removes one a test made for itself.
 */
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import pg from 'pg';

/** Where the chaos cluster lives. */
export interface ChaosCluster {
  version: string;
  name: string;
  port: number;
  /** Connection URL for the `postgres` database, user `postgres`. */
  url: string;
  /** Addresses it listens on besides 127.0.0.1 (none: Debian's default, localhost). */
  listenAddresses: readonly string[];
  /** Client networks (CIDR) let in with trust authentication besides loopback. */
  trustNetworks: readonly string[];
  /** postgresql.conf settings written before each start. */
  settings: Readonly<Record<string, string>>;
}

/** How a test's own cluster differs from the default chaos cluster. */
export interface ChaosClusterOptions {
  /** Cluster name (default `chaos`). */
  name?: string;
  /** Port (default DOCKET_CHAOS_PG_PORT or 5433); never 5432. */
  port?: number;
  listenAddresses?: readonly string[];
  trustNetworks?: readonly string[];
  settings?: Readonly<Record<string, string>>;
}

/**
 * A disposable cluster: by default the chaos harness's (name `chaos`, port 5433, override with
 * DOCKET_CHAOS_PG_PORT); other harnesses that restart their database pass their own name and
 * port, so no two harnesses ever restart each other's cluster.
 */
export function chaosCluster(options: ChaosClusterOptions = {}): ChaosCluster {
  const version = process.env.DOCKET_CHAOS_PG_VERSION ?? readdirSync('/etc/postgresql').sort().at(-1) ?? '15';
  const port = options.port ?? Number(process.env.DOCKET_CHAOS_PG_PORT ?? 5433);
  if (port === 5432) throw new Error('a disposable cluster must not use port 5432: that is the shared main cluster');
  return {
    version,
    name: options.name ?? 'chaos',
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    listenAddresses: options.listenAddresses ?? [],
    trustNetworks: options.trustNetworks ?? [],
    settings: options.settings ?? {},
  };
}

function run(command: string, args: string[]): string {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

const execFileAsync = promisify(execFile);

/** Runs a command without blocking the event loop: the proxy and producer must keep running meanwhile. */
async function runAsync(command: string, args: string[]): Promise<void> {
  await execFileAsync(command, args, { encoding: 'utf8' });
}

function clusterStatus(cluster: ChaosCluster): 'missing' | 'online' | 'down' {
  const line = run('pg_lsclusters', ['--no-header'])
    .split('\n')
    .map((row) => row.trim().split(/\s+/))
    .find((cols) => cols[0] === cluster.version && cols[1] === cluster.name);
  if (!line) return 'missing';
  return line[3] === 'online' ? 'online' : 'down';
}

/** Waits until the cluster accepts a query, or throws after `timeoutMs`. */
export async function waitForCluster(cluster: ChaosCluster, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: cluster.url, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (error) {
      lastError = error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await client.end().catch(() => {});
    }
  }
  throw new Error(`chaos cluster on port ${cluster.port} did not come up: ${String(lastError)}`);
}

/** Writes the cluster's listen addresses, settings and trusted networks (idempotent); they apply at its next start. */
function configureCluster(cluster: ChaosCluster): void {
  const settings: Record<string, string> = { ...cluster.settings };
  if (cluster.listenAddresses.length > 0) {
    settings.listen_addresses = ['127.0.0.1', ...cluster.listenAddresses].join(',');
  }
  for (const [key, value] of Object.entries(settings)) {
    run('pg_conftool', [cluster.version, cluster.name, 'set', key, value]);
  }
  const hbaFile = `/etc/postgresql/${cluster.version}/${cluster.name}/pg_hba.conf`;
  const hbaLines = readFileSync(hbaFile, 'utf8').split('\n');
  for (const network of cluster.trustNetworks) {
    const line = `host all all ${network} trust`;
    if (!hbaLines.includes(line)) appendFileSync(hbaFile, `${line}\n`);
  }
}

/**
 * Creates the chaos cluster if missing (trust auth, loopback), configures and starts it if down,
 * waits for it. A cluster already online keeps the configuration it was started with.
 */
export async function ensureChaosCluster(cluster: ChaosCluster = chaosCluster()): Promise<ChaosCluster> {
  const status = clusterStatus(cluster);
  if (status === 'missing') {
    run('pg_createcluster', [cluster.version, cluster.name, '--port', String(cluster.port), '--', '--auth=trust']);
  }
  if (status !== 'online') {
    configureCluster(cluster);
    run('pg_ctlcluster', ['--skip-systemctl-redirect', cluster.version, cluster.name, 'start']);
  }
  await waitForCluster(cluster);
  return cluster;
}

/** Stops and deletes the cluster, data and configuration (a test's own cluster); does nothing if it is missing. */
export function dropChaosCluster(cluster: ChaosCluster): void {
  if (cluster.name === 'main' || cluster.port === 5432) throw new Error('refusing to drop the shared main cluster');
  if (clusterStatus(cluster) === 'missing') return;
  run('pg_dropcluster', ['--stop', cluster.version, cluster.name]);
}

/** Crashes and restarts the chaos cluster (`-m immediate`: no checkpoint, crash recovery on start). */
export async function restartChaosCluster(cluster: ChaosCluster): Promise<void> {
  try {
    await runAsync('pg_ctlcluster', [
      '--skip-systemctl-redirect',
      cluster.version,
      cluster.name,
      'restart',
      '-m',
      'immediate',
    ]);
  } catch {
    // A restart that raced a start in progress fails; starting again is idempotent.
    await runAsync('pg_ctlcluster', ['--skip-systemctl-redirect', cluster.version, cluster.name, 'start']).catch(
      () => {},
    );
  }
  await waitForCluster(cluster);
}

/**
 * Stops the cluster at once (`-m immediate`: no checkpoint, so the next start runs crash
 * recovery, as after a power cut of the database host). Resolves once the server is down.
 */
export async function stopChaosClusterImmediately(cluster: ChaosCluster): Promise<void> {
  await runAsync('pg_ctlcluster', [
    '--skip-systemctl-redirect',
    cluster.version,
    cluster.name,
    'stop',
    '-m',
    'immediate',
  ]);
}

/** Starts a stopped cluster; resolves when `pg_ctlcluster` returns (the server may still be recovering). */
export async function startChaosCluster(cluster: ChaosCluster): Promise<void> {
  await runAsync('pg_ctlcluster', ['--skip-systemctl-redirect', cluster.version, cluster.name, 'start']);
}

/** Terminates this cluster's backends whose query matches `pattern` (and `extra` other Docket ones); returns how many. */
export async function terminateBackends(cluster: ChaosCluster, pattern: string, extra: number): Promise<number> {
  const client = new pg.Client({ connectionString: cluster.url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    const result = await client.query<{ n: string }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM (
         (SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query ILIKE $1)
         UNION
         (SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND application_name = 'docket'
            AND backend_type = 'client backend' ORDER BY random() LIMIT $2)
       ) victims`,
      [pattern, extra],
    );
    return Number(result.rows[0]?.n ?? 0);
  } finally {
    await client.end().catch(() => {});
  }
}
