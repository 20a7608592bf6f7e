/**
 * A real high-availability PostgreSQL for failover tests: one etcd, two PostgreSQL 15 nodes under
 * Patroni (a leader and a synchronous replica, `synchronous_mode: true`, ttl 10) and HAProxy,
 * whose write port routes to whichever node answers Patroni's REST health check `GET /primary`
 * with 200. Docket connects to HAProxy, exactly as docs/operations.md ("High availability")
 * recommends.
 *
 * Everything lives in one temporary directory and on this harness's own ports (HAProxy 5440,
 * PostgreSQL 5441-5442, Patroni REST 8440-8441, etcd 23790/23800); the main cluster on 5432 is
 * never touched. PostgreSQL refuses to run as root, so Patroni (which starts PostgreSQL) runs as
 * the `postgres` user; etcd and HAProxy run as whoever runs the test. `stop()` kills every process
 * the harness started (Patroni, each postmaster, etcd, HAProxy) and removes the directory.
 *
 * Needs the Debian packages patroni, etcd-server, etcd-client and haproxy (.ci/run installs them).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const execFileAsync = promisify(execFile);

/** The ports this harness owns. The main cluster's 5432 is not among them, by construction. */
export const PATRONI_PORTS = {
  haproxyWrite: 5440,
  postgres: [5441, 5442],
  rest: [8440, 8441],
  etcdClient: 23790,
  etcdPeer: 23800,
} as const;

/** Patroni's leader-key ttl: a dead leader's key expires after this long, which bounds failover time. */
export const PATRONI_TTL_S = 10;

const SCOPE = 'docket-failover';
const PG_BIN = '/usr/lib/postgresql/15/bin';

/** One Patroni-managed PostgreSQL node. */
export interface PatroniNode {
  name: string;
  pgPort: number;
  restPort: number;
  dir: string;
  dataDir: string;
  configFile: string;
  /** Direct URL of this node (bypassing HAProxy), database `postgres`. */
  url: string;
}

/** What one `GET /cluster` member looks like (the fields used here). */
interface ClusterMember {
  name: string;
  role: string;
  state: string;
  lag?: number | string;
}

/** Runs `command` and resolves its stdout; rejects with its stderr. */
async function run(command: string, args: string[], timeoutMs = 60_000): Promise<string> {
  const { stdout } = await execFileAsync(command, args, { encoding: 'utf8', timeout: timeoutMs });
  return stdout;
}

function postgresIds(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((row) => row.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined) throw new Error('no postgres user: install postgresql-15');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Fails fast, naming the package, when a binary the harness needs is missing. */
export function assertPatroniInstalled(): void {
  const needed: [string, string][] = [
    ['/usr/bin/patroni', 'patroni'],
    ['/usr/bin/patronictl', 'patroni'],
    ['/usr/bin/etcd', 'etcd-server'],
    ['/usr/sbin/haproxy', 'haproxy'],
    [`${PG_BIN}/postgres`, 'postgresql-15'],
  ];
  const missing = needed.filter(([path]) => !existsSync(path)).map(([, pkg]) => pkg);
  if (missing.length > 0) {
    throw new Error(`failover harness needs: apt-get install -y ${[...new Set(missing)].join(' ')}`);
  }
}

/** Sleeps without holding anything. */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves whether one SELECT 1 succeeds on `url` within `timeoutMs`. */
export async function canQuery(url: string, timeoutMs = 1000): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The Patroni cluster and its etcd and HAProxy, started by {@link PatroniCluster.start}. */
export class PatroniCluster {
  readonly nodes: PatroniNode[];
  /** Docket's URL: HAProxy's write port, which always routes to the current leader. */
  readonly writeUrl = `postgres://postgres@127.0.0.1:${PATRONI_PORTS.haproxyWrite}/postgres`;
  private readonly patroni = new Map<string, ChildProcess>();
  private etcd: ChildProcess | undefined;
  private haproxy: ChildProcess | undefined;
  private readonly ids = postgresIds();
  private stopped = false;

  private constructor(readonly dir: string) {
    this.nodes = PATRONI_PORTS.postgres.map((pgPort, i) => {
      const name = `node${i + 1}`;
      const nodeDir = join(dir, name);
      return {
        name,
        pgPort,
        restPort: PATRONI_PORTS.rest[i] as number,
        dir: nodeDir,
        dataDir: join(nodeDir, 'data'),
        configFile: join(nodeDir, 'patroni.yml'),
        url: `postgres://postgres@127.0.0.1:${pgPort}/postgres`,
      };
    });
  }

  /**
   * Starts etcd, both Patroni nodes (node1 bootstraps and leads, node2 clones it and becomes the
   * synchronous standby) and HAProxy; resolves once a write through HAProxy succeeds and the
   * replica is the synchronous standby. Tears everything down if any step fails.
   */
  static async start(log: (line: string) => void = () => {}): Promise<PatroniCluster> {
    assertPatroniInstalled();
    // One more try from scratch if the first bootstrap fails: it timed out (60 s; 8 s alone) on
    // a CI machine busy with the rest of the suite. This is the harness's own setup;
    // nothing about Docket is retried, and a second failure fails the suite with Patroni's log.
    for (let attempt = 1; ; attempt += 1) {
      await assertPortsFree();
      const cluster = new PatroniCluster(mkdtempSync(join(tmpdir(), 'docket-patroni-')));
      try {
        await cluster.boot(log);
        return cluster;
      } catch (error) {
        await cluster.stop();
        if (attempt >= 2) throw error;
        log(`patroni: bootstrap failed, starting again from scratch: ${(error as Error).message}`);
      }
    }
  }

  private async boot(log: (line: string) => void): Promise<void> {
    const started = Date.now();
    chmodSync(this.dir, 0o755);
    this.startEtcd();
    await waitFor('etcd', 20_000, async () => {
      const res = await fetchQuietly(`http://127.0.0.1:${PATRONI_PORTS.etcdClient}/health`);
      return res?.ok === true;
    });
    for (const node of this.nodes) this.writeNodeConfig(node);
    const [first, second] = this.nodes as [PatroniNode, PatroniNode];
    this.startPatroni(first);
    try {
      await waitFor('node1 to bootstrap and lead', 120_000, async () => (await this.roleOf(first)) === 'primary');
    } catch (error) {
      // Say why: the tail of Patroni's own log (a failed initdb, a DCS it cannot reach) is the
      // diagnosis, and the temp dir holding it is removed on teardown.
      throw new Error(
        `${(error as Error).message}; node1's patroni.log ends:\n${logTail(join(first.dir, 'patroni.log'))}`,
      );
    }
    this.startPatroni(second);
    this.startHaproxy();
    await this.waitHealthy(90_000);
    log(
      `patroni: leader node1, synchronous standby node2, HAProxy on ${PATRONI_PORTS.haproxyWrite} (${Date.now() - started} ms)`,
    );
  }

  private startEtcd(): void {
    const dataDir = join(this.dir, 'etcd');
    mkdirSync(dataDir, { mode: 0o700 });
    const client = `http://127.0.0.1:${PATRONI_PORTS.etcdClient}`;
    const peer = `http://127.0.0.1:${PATRONI_PORTS.etcdPeer}`;
    this.etcd = this.spawnLogged(
      'etcd',
      [
        '--name',
        'docket-failover-etcd',
        '--data-dir',
        dataDir,
        '--listen-client-urls',
        client,
        '--advertise-client-urls',
        client,
        '--listen-peer-urls',
        peer,
        '--initial-advertise-peer-urls',
        peer,
        '--initial-cluster',
        `docket-failover-etcd=${peer}`,
        '--initial-cluster-state',
        'new',
        '--initial-cluster-token',
        'docket-failover',
      ],
      join(this.dir, 'etcd.log'),
      false,
    );
  }

  /**
   * Patroni's configuration (JSON is YAML). The replication settings are the documented ones:
   * synchronous_mode, so a commit is acknowledged only once the standby has flushed it and only a
   * synchronous standby may be promoted; maximum_lag_on_failover as a second guard; pg_rewind so
   * a killed leader can rejoin as a replica. ttl 10 with loop_wait 1 and retry_timeout 4 (Patroni
   * needs loop_wait + 2 × retry_timeout <= ttl).
   */
  private writeNodeConfig(node: PatroniNode): void {
    mkdirSync(node.dir, { recursive: true, mode: 0o700 });
    const config = {
      scope: SCOPE,
      name: node.name,
      log: { level: 'INFO' },
      restapi: { listen: `127.0.0.1:${node.restPort}`, connect_address: `127.0.0.1:${node.restPort}` },
      etcd3: { hosts: [`127.0.0.1:${PATRONI_PORTS.etcdClient}`] },
      bootstrap: {
        dcs: {
          ttl: PATRONI_TTL_S,
          loop_wait: 1,
          retry_timeout: 4,
          maximum_lag_on_failover: 1_048_576,
          synchronous_mode: true,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              wal_level: 'replica',
              hot_standby: 'on',
              wal_log_hints: 'on',
              max_wal_senders: 10,
              max_replication_slots: 10,
              wal_keep_size: '256MB',
              max_connections: 200,
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { auth: 'trust' }],
      },
      postgresql: {
        listen: `127.0.0.1:${node.pgPort}`,
        connect_address: `127.0.0.1:${node.pgPort}`,
        data_dir: node.dataDir,
        bin_dir: PG_BIN,
        pgpass: join(node.dir, 'pgpass'),
        authentication: {
          superuser: { username: 'postgres', password: 'postgres' },
          replication: { username: 'replicator', password: 'replicator' },
          rewind: { username: 'postgres', password: 'postgres' },
        },
        // Loopback only, trust: the harness's clusters are reachable from this machine alone.
        pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust'],
        parameters: { unix_socket_directories: node.dir },
      },
      tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
    };
    writeFileSync(node.configFile, JSON.stringify(config, null, 2));
    chownSync(node.dir, this.ids.uid, this.ids.gid);
    chownSync(node.configFile, this.ids.uid, this.ids.gid);
  }

  /** Starts (or restarts) Patroni on `node`, as `postgres`; Patroni starts PostgreSQL itself. */
  startPatroni(node: PatroniNode): void {
    if (this.stopped) return;
    const child = this.spawnLogged('/usr/bin/patroni', [node.configFile], join(node.dir, 'patroni.log'), true);
    this.patroni.set(node.name, child);
  }

  private startHaproxy(): void {
    const servers = this.nodes
      .map((node) => `  server ${node.name} 127.0.0.1:${node.pgPort} maxconn 200 check port ${node.restPort}`)
      .join('\n');
    // Checks every 500 ms, down after 2 failures: a dead leader stops receiving connections within
    // about a second; on-marked-down shutdown-sessions cuts the connections still open to it, so
    // no client keeps talking to a node that is no longer the leader.
    const config = `global
  maxconn 1000

defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s

listen docket_write
  bind 127.0.0.1:${PATRONI_PORTS.haproxyWrite}
  option httpchk
  http-check send meth GET uri /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
${servers}
`;
    const file = join(this.dir, 'haproxy.cfg');
    writeFileSync(file, config);
    this.haproxy = this.spawnLogged('/usr/sbin/haproxy', ['-f', file, '-db'], join(this.dir, 'haproxy.log'), false);
  }

  private spawnLogged(command: string, args: string[], logFile: string, asPostgres: boolean): ChildProcess {
    const out = openSync(logFile, 'a');
    if (asPostgres) chownSync(logFile, this.ids.uid, this.ids.gid);
    const child = spawn(command, args, {
      stdio: ['ignore', out, out],
      // The cluster's own folder (mode 755), not the checkout: CI's checkout may sit in a folder
      // the postgres user cannot enter (a mktemp dir is 700), and Patroni's bootstrap then stalled
      // in `bootstrap in progress` after `could not change directory … Permission denied`.
      cwd: this.dir,
      // Its own process group, so teardown can kill whatever it started with one signal.
      detached: true,
      ...(asPostgres
        ? {
            uid: this.ids.uid,
            gid: this.ids.gid,
            env: { PATH: `${PG_BIN}:/usr/bin:/bin`, HOME: '/var/lib/postgresql', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
          }
        : {}),
    });
    child.unref();
    liveProcessGroups.add(child);
    child.once('exit', () => liveProcessGroups.delete(child));
    return child;
  }

  /** `primary`, `replica` or `down`, by the node's Patroni REST health checks. */
  async roleOf(node: PatroniNode): Promise<'primary' | 'replica' | 'down'> {
    const primary = await fetchQuietly(`http://127.0.0.1:${node.restPort}/primary`);
    if (primary?.status === 200) return 'primary';
    const replica = await fetchQuietly(`http://127.0.0.1:${node.restPort}/replica`);
    return replica?.status === 200 ? 'replica' : 'down';
  }

  /** The node Patroni reports as leader now; throws when none is. */
  async leader(): Promise<PatroniNode> {
    for (const node of this.nodes) if ((await this.roleOf(node)) === 'primary') return node;
    throw new Error('no Patroni node is the leader');
  }

  /** The members as Patroni's `GET /cluster` reports them, from any node that answers. */
  async members(): Promise<ClusterMember[]> {
    for (const node of this.nodes) {
      const res = await fetchQuietly(`http://127.0.0.1:${node.restPort}/cluster`);
      if (res?.ok) return ((await res.json()) as { members: ClusterMember[] }).members;
    }
    return [];
  }

  /**
   * Waits until the cluster can lose its leader without losing an acknowledged commit: one
   * leader, the other node its synchronous standby and streaming (checked on the leader itself in
   * pg_stat_replication), and a write through HAProxy succeeds.
   */
  async waitHealthy(timeoutMs = 60_000): Promise<void> {
    await waitFor('a leader with a streaming synchronous standby', timeoutMs, async () => {
      const members = await this.members();
      if (!members.some((m) => m.role === 'leader') || !members.some((m) => m.role === 'sync_standby')) return false;
      const leader = await this.leader().catch(() => undefined);
      if (!leader) return false;
      const client = new pg.Client({ connectionString: leader.url, connectionTimeoutMillis: 1000 });
      client.on('error', () => {});
      try {
        await client.connect();
        const rows = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'`,
        );
        if (Number(rows.rows[0]?.n) !== 1) return false;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => {});
      }
      return canQuery(this.writeUrl);
    });
  }

  /** Waits until a write through HAProxy succeeds (some node leads and HAProxy routes to it). */
  async waitWritable(timeoutMs = 60_000): Promise<void> {
    await waitFor('a writable leader behind HAProxy', timeoutMs, async () => {
      if (!(await canQuery(this.writeUrl, 500))) return false;
      const client = new pg.Client({ connectionString: this.writeUrl, connectionTimeoutMillis: 500 });
      client.on('error', () => {});
      try {
        await client.connect();
        const r = await client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
        return r.rows[0]?.standby === false;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => {});
      }
    });
  }

  /**
   * `kill -9` of the leader's postmaster and of its Patroni, at the same instant: the leader key in
   * etcd is then only given up by its ttl, the worst case. Resolves the killed node and the host
   * epoch ms of the kill.
   */
  async killLeader(): Promise<{ node: PatroniNode; killedAt: number }> {
    const node = await this.leader();
    const postmaster = postmasterPid(node);
    const patroni = this.patroni.get(node.name);
    const killedAt = Date.now();
    if (patroni?.pid !== undefined) process.kill(patroni.pid, 'SIGKILL');
    if (postmaster !== undefined) process.kill(postmaster, 'SIGKILL');
    this.patroni.delete(node.name);
    return { node, killedAt };
  }

  /**
   * Brings a killed node back: waits for its orphaned backends to exit (they notice the dead
   * postmaster), clears the stale pid file, and starts its Patroni, which rewinds it and rejoins it
   * as a replica.
   */
  async restartNode(node: PatroniNode): Promise<void> {
    await waitFor(`${node.name}'s old backends to exit`, 30_000, async () => !(await portInUse(node.pgPort)));
    this.startPatroni(node);
  }

  /**
   * A planned `patronictl switchover --force` from the current leader to the other node; resolves
   * the old and new leader and the host epoch ms the command was issued.
   */
  async switchover(): Promise<{ from: PatroniNode; to: PatroniNode; startedAt: number }> {
    const from = await this.leader();
    const to = this.nodes.find((node) => node !== from) as PatroniNode;
    const startedAt = Date.now();
    await run('/usr/bin/patronictl', [
      '-c',
      from.configFile,
      'switchover',
      '--leader',
      from.name,
      '--candidate',
      to.name,
      '--force',
      SCOPE,
    ]);
    return { from, to, startedAt };
  }

  /** Kills every process the harness started and removes its directory; never throws. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const child of [...this.patroni.values(), this.haproxy, this.etcd]) killGroup(child);
    this.patroni.clear();
    // Patroni may have started a postmaster in another session: kill those by their pid files.
    for (const node of this.nodes) {
      const pid = postmasterPid(node);
      if (pid !== undefined) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    }
    await waitFor('the harness ports to close', 20_000, async () => {
      const busy = await Promise.all(allPorts().map(portInUse));
      return !busy.some(Boolean);
    }).catch(() => {});
    if (process.env.DOCKET_FAILOVER_KEEP !== '1') rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Every process group the harness started and has not seen exit: killed when this process exits. */
const liveProcessGroups = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of liveProcessGroups) killGroup(child);
});

function killGroup(child: ChildProcess | undefined): void {
  if (child?.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/** The postmaster's pid from its pid file, when PostgreSQL is (or was) running there. */
function postmasterPid(node: PatroniNode): number | undefined {
  try {
    const pid = Number(readFileSync(join(node.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

function allPorts(): number[] {
  return [
    PATRONI_PORTS.haproxyWrite,
    ...PATRONI_PORTS.postgres,
    ...PATRONI_PORTS.rest,
    PATRONI_PORTS.etcdClient,
    PATRONI_PORTS.etcdPeer,
  ];
}

async function portInUse(port: number): Promise<boolean> {
  const out = await run('ss', ['-Htln', `sport = :${port}`]).catch(() => '');
  return out.trim() !== '';
}

async function assertPortsFree(): Promise<void> {
  const busy: number[] = [];
  for (const port of allPorts()) if (await portInUse(port)) busy.push(port);
  if (busy.length > 0) {
    throw new Error(`failover harness ports in use: ${busy.join(', ')} (a previous run left processes behind?)`);
  }
}

async function fetchQuietly(url: string): Promise<Response | undefined> {
  try {
    return await fetch(url, { signal: AbortSignal.timeout(1000) });
  } catch {
    return undefined;
  }
}

/** Polls `check` every 200 ms until it resolves true; throws naming `what` after `timeoutMs`. */
export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await pause(200);
  }
}

/** The last lines of a log file, or a note that it could not be read. */
function logTail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (error) {
    return `(unreadable: ${(error as Error).message})`;
  }
}
