/**
 * A latest system's store side, hosted in a Node 24 process for a harness on an older Node
 * (remote-system.ts forks it). Answers `{ id, op, args }` requests with `{ id, value }` or
 * `{ id, error }`. Dates cross intact: the channel uses the advanced (structured clone) serialization.
 */
import type { BenchStore, SystemConfig, SystemModule, Variant } from '../systems/system.js';
import { isLatestSystem, loadLatestSystem } from './latest.js';

/** A request from the harness. */
export type HostRequest = { id: number } & (
  | { op: 'describe'; args: [variants: Variant[], concurrencies: number[]] }
  | { op: 'reset' | 'openStore' | 'destroy'; args: [config: SystemConfig] }
  | { op: 'insert'; args: [store: number, jobs: { i: number; runAt?: Date }[]] }
  | { op: 'submitOne'; args: [store: number, i: number, key?: string] }
  | { op: 'submitOneAt'; args: [store: number, i: number, runAtMs: number] }
  | { op: 'remainingDue' | 'close'; args: [store: number] }
);

/** The answer to one request. */
export type HostReply = { id: number; value?: unknown; error?: string };

const name = process.argv[2] ?? '';
if (!isLatestSystem(name)) throw new Error(`system-host: not a latest system: ${name}`);
const system: Promise<SystemModule> = loadLatestSystem(name);
const stores = new Map<number, BenchStore>();
let nextStore = 1;

function storeOf(id: number): BenchStore {
  const store = stores.get(id);
  if (!store) throw new Error(`no open store ${id}`);
  return store;
}

async function answer(request: HostRequest): Promise<unknown> {
  const module = await system;
  switch (request.op) {
    case 'describe': {
      const [variants, concurrencies] = request.args;
      return {
        variants: module.variants,
        texts: variants.map((variant) => concurrencies.map((c) => module.describe(variant, c))),
      };
    }
    case 'reset':
      return module.reset(request.args[0]);
    case 'destroy':
      return module.destroy(request.args[0]);
    case 'openStore': {
      const id = nextStore++;
      stores.set(id, await module.openStore(request.args[0]));
      return id;
    }
    case 'insert':
      return storeOf(request.args[0]).insert(request.args[1]);
    case 'submitOne':
      return storeOf(request.args[0]).submitOne(request.args[1], request.args[2]);
    case 'submitOneAt':
      return storeOf(request.args[0]).submitOneAt(request.args[1], request.args[2]);
    case 'remainingDue':
      return storeOf(request.args[0]).remainingDue();
    case 'close': {
      const store = storeOf(request.args[0]);
      stores.delete(request.args[0]);
      return store.close();
    }
  }
}

process.on('message', (request: HostRequest) => {
  answer(request).then(
    (value) => process.send?.({ id: request.id, value } satisfies HostReply),
    (error: unknown) =>
      process.send?.({
        id: request.id,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      } satisfies HostReply),
  );
});
// The harness is gone: close what is open and leave.
process.on('disconnect', () => {
  void Promise.allSettled([...stores.values()].map((store) => store.close())).then(() => process.exit(0));
  setTimeout(() => process.exit(0), 3_000).unref();
});
process.send?.({ id: 0, value: 'ready' } satisfies HostReply);
