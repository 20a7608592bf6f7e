/**
 * A latest system driven from a harness on an older Node: the store side runs in a Node 24 host
 * process (system-host.ts) over IPC; workers are forked by the harness with the same Node 24
 * binary (SystemConfig.nodePath), so they load the driver directly. One host per system, started
 * on first use and ended with the harness.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchJob, SystemConfig, SystemModule, Variant } from '../systems/system.js';
import type { LatestSystemName } from './latest.js';
import type { HostReply, HostRequest } from './system-host.js';

const HOST_ENTRY = fileURLToPath(new URL('./system-host.ts', import.meta.url));
/** Two probe concurrencies: every number in a description is linear in the concurrency (c, c + 1, 4c). */
const PROBES = [1_000, 2_000] as const;
const NUMBER = /\d+(?:\.\d+)?/g;

/** Rebuilds a description for `concurrency` from the same text at the two probe concurrencies. */
export function interpolateDescription(atFirst: string, atSecond: string, concurrency: number): string {
  const second = atSecond.match(NUMBER) ?? [];
  let k = 0;
  return atFirst.replace(NUMBER, (text) => {
    const a = Number(text);
    const b = Number(second[k++] ?? text);
    if (a === b) return text;
    const slope = (b - a) / (PROBES[1] - PROBES[0]);
    return String(a + slope * (concurrency - PROBES[0]));
  });
}

/** Every host this process started, so the harness can end them when it is done. */
const hosts = new Set<Host>();

/** Ends every host process (their IPC channels would otherwise keep the harness alive). */
export function closeRemoteHosts(): void {
  for (const host of hosts) host.close();
  hosts.clear();
}

class Host {
  private readonly child: ChildProcess;
  private readonly waiting = new Map<number, (reply: HostReply) => void>();
  private nextId = 1;
  readonly ready: Promise<void>;

  constructor(name: LatestSystemName, nodePath: string) {
    this.child = fork(HOST_ENTRY, [name], {
      execPath: nodePath,
      execArgv: ['--import', 'tsx'],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    // Never keeps the harness alive on its own.
    this.child.unref();
    this.ready = new Promise((resolve, reject) => {
      this.waiting.set(0, (reply) => (reply.error ? reject(new Error(reply.error)) : resolve()));
    });
    this.child.on('message', (reply: HostReply) => {
      const resolve = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      resolve?.(reply);
    });
    this.child.on('exit', (code, signal) => {
      for (const resolve of this.waiting.values())
        resolve({ id: -1, error: `${name} host exited (${code ?? signal})` });
      this.waiting.clear();
    });
    process.once('exit', () => this.child.kill());
    hosts.add(this);
  }

  /** Disconnects: the host closes its stores and exits. */
  close(): void {
    if (this.child.connected) this.child.disconnect();
  }

  async call(op: HostRequest['op'], ...args: unknown[]): Promise<unknown> {
    await this.ready;
    const id = this.nextId++;
    const reply = await new Promise<HostReply>((resolve) => {
      this.waiting.set(id, resolve);
      this.child.send({ id, op, args });
    });
    if (reply.error !== undefined) throw new Error(reply.error);
    return reply.value;
  }
}

/** The latest system `name` with its store side in a Node 24 host process. */
export async function remoteSystem(name: LatestSystemName, nodePath: string): Promise<SystemModule> {
  const host = new Host(name, nodePath);
  const all: Variant[] = ['default', 'tuned'];
  const info = (await host.call('describe', all, [...PROBES])) as { variants: Variant[]; texts: string[][] };
  const withNode = (config: SystemConfig): SystemConfig => ({ ...config, nodePath });
  return {
    name,
    variants: info.variants,
    describe(variant, concurrency) {
      const [atFirst = '', atSecond = ''] = info.texts[all.indexOf(variant)] ?? [];
      return `${interpolateDescription(atFirst, atSecond, concurrency)} (Node 24)`;
    },
    async reset(config) {
      await host.call('reset', withNode(config));
    },
    async destroy(config) {
      await host.call('destroy', withNode(config));
    },
    async openStore(config) {
      const store = (await host.call('openStore', withNode(config))) as number;
      return {
        async insert(jobs: readonly BenchJob[]) {
          await host.call('insert', store, jobs);
        },
        async submitOne(i: number, key?: string) {
          await host.call('submitOne', store, i, key);
        },
        async submitOneAt(i: number, runAtMs: number) {
          await host.call('submitOneAt', store, i, runAtMs);
        },
        async remainingDue() {
          return (await host.call('remainingDue', store)) as number;
        },
        async close() {
          await host.call('close', store);
        },
      };
    },
    async startWorker() {
      throw new Error(
        `${name} workers run in their own Node 24 processes (SystemConfig.nodePath), never in the harness`,
      );
    },
  };
}
