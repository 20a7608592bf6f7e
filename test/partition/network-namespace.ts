/**
 * A network namespace joined to the root namespace by a veth pair, and an nftables partition inside
 * it. The partition test runs one worker in the namespace, so it reaches PostgreSQL only over the
 * veth, and then drops that worker's packets without touching anything else on the machine.
 *
 * Scope, on purpose: the namespace has loopback and one private /30 link to the root namespace
 * (10.213.x.1 on the root side, 10.213.x.2 inside), no default route and no forwarding, so nothing
 * in it can reach beyond this machine. The nftables table lives inside the namespace and only
 * drops traffic to and from the root side's address; it disappears with the namespace. Needs root,
 * `ip` (iproute2) and `nft` (nftables); {@link assertNetworkTools} says which is missing.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';

/** Prefix of every namespace (and veth) this module creates, so leftovers of a killed run can be found. */
const NAMESPACE_PREFIX = 'docket-part-';
const VETH_PREFIX = 'dkp';
/** The nftables table inside the namespace that holds the partition's rules. */
const NFT_TABLE = 'docket_partition';

/** One namespace, its veth pair and their addresses. */
export interface PartitionNetwork {
  /** `docket-part-<random>`. */
  namespace: string;
  /** The veth end in the root namespace (holds {@link hostAddress}). */
  hostVeth: string;
  /** The veth end inside the namespace (holds {@link namespaceAddress}). */
  namespaceVeth: string;
  /** Root side of the link: where PostgreSQL listens for the namespace. */
  hostAddress: string;
  /** Inside the namespace: the partitioned worker's address, as PostgreSQL sees it (client_addr). */
  namespaceAddress: string;
}

function run(command: string, args: readonly string[]): string {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function tryRun(command: string, args: readonly string[]): void {
  try {
    run(command, args);
  } catch {
    // Cleanup of something that may already be gone.
  }
}

/** Throws a clear error naming what this machine lacks (root, iproute2, nftables) to build a partition. */
export function assertNetworkTools(): void {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) missing.push('root (network namespaces and nftables need CAP_NET_ADMIN)');
  for (const [tool, pkg] of [
    ['ip', 'iproute2'],
    ['nft', 'nftables'],
  ] as const) {
    try {
      run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      missing.push(`\`${tool}\` (apt-get install -y ${pkg})`);
    }
  }
  if (missing.length > 0) throw new Error(`the partition test needs ${missing.join(', ')}`);
}

/** Deletes namespaces and veths left by an earlier run that was killed before its cleanup. */
export function removeLeftoverNetworks(): string[] {
  const namespaces = run('ip', ['netns', 'list'])
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name.startsWith(NAMESPACE_PREFIX));
  for (const namespace of namespaces) tryRun('ip', ['netns', 'delete', namespace]);
  const veths = run('ip', ['-o', 'link', 'show', 'type', 'veth'])
    .split('\n')
    .map((line) => /^\d+:\s+([^@:\s]+)/.exec(line)?.[1] ?? '')
    .filter((name) => name.startsWith(VETH_PREFIX));
  for (const veth of veths) tryRun('ip', ['link', 'delete', veth]);
  return namespaces;
}

/** A /30 in 10.213.0.0/16 that no interface on this machine uses yet; its .1 and .2 addresses. */
function freeLinkAddresses(): { hostAddress: string; namespaceAddress: string } {
  const inUse = run('ip', ['-4', '-o', 'addr', 'show']);
  for (let tries = 0; tries < 64; tries += 1) {
    const third = randomInt(0, 256);
    const base = randomInt(0, 64) * 4;
    const prefix = `10.213.${third}.`;
    if (inUse.includes(`${prefix}${base + 1}/`) || inUse.includes(`${prefix}${base + 2}/`)) continue;
    return { hostAddress: `${prefix}${base + 1}`, namespaceAddress: `${prefix}${base + 2}` };
  }
  throw new Error('no free /30 in 10.213.0.0/16 for the partition test');
}

/** Creates the namespace, the veth pair and their addresses; undo with {@link destroyPartitionNetwork}. */
export function createPartitionNetwork(): PartitionNetwork {
  const suffix = randomBytes(3).toString('hex');
  const { hostAddress, namespaceAddress } = freeLinkAddresses();
  const network: PartitionNetwork = {
    namespace: `${NAMESPACE_PREFIX}${suffix}`,
    // Interface names are at most 15 characters.
    hostVeth: `${VETH_PREFIX}${suffix}h`,
    namespaceVeth: `${VETH_PREFIX}${suffix}n`,
    hostAddress,
    namespaceAddress,
  };
  try {
    run('ip', ['netns', 'add', network.namespace]);
    run('ip', ['link', 'add', network.hostVeth, 'type', 'veth', 'peer', 'name', network.namespaceVeth]);
    run('ip', ['link', 'set', network.namespaceVeth, 'netns', network.namespace]);
    run('ip', ['addr', 'add', `${hostAddress}/30`, 'dev', network.hostVeth]);
    run('ip', ['link', 'set', network.hostVeth, 'up']);
    inNamespace(network, 'ip', ['link', 'set', 'lo', 'up']);
    inNamespace(network, 'ip', ['addr', 'add', `${namespaceAddress}/30`, 'dev', network.namespaceVeth]);
    inNamespace(network, 'ip', ['link', 'set', network.namespaceVeth, 'up']);
  } catch (error) {
    destroyPartitionNetwork(network);
    throw error;
  }
  return network;
}

/** Runs a command inside the namespace and returns its stdout. */
export function inNamespace(network: PartitionNetwork, command: string, args: readonly string[]): string {
  return run('ip', ['netns', 'exec', network.namespace, command, ...args]);
}

/** The argv prefix that runs a command inside the namespace (for spawn). */
export function namespaceArgv(network: PartitionNetwork): string[] {
  return ['netns', 'exec', network.namespace];
}

/**
 * Cuts the namespace off from the root side: an nftables table inside the namespace drops every
 * packet to or from {@link PartitionNetwork.hostAddress}, in both directions, silently (no reset,
 * no ICMP), the way a failed switch or a cut cable looks to both ends.
 */
export function partition(network: PartitionNetwork): void {
  const rules = [
    `table inet ${NFT_TABLE} {`,
    '  chain input {',
    '    type filter hook input priority 0; policy accept;',
    `    ip saddr ${network.hostAddress} drop`,
    '  }',
    '  chain output {',
    '    type filter hook output priority 0; policy accept;',
    `    ip daddr ${network.hostAddress} drop`,
    '  }',
    '}',
  ].join('\n');
  execFileSync('ip', ['netns', 'exec', network.namespace, 'nft', '-f', '-'], {
    input: rules,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** Removes the partition's rules: packets flow again. */
export function heal(network: PartitionNetwork): void {
  inNamespace(network, 'nft', ['delete', 'table', 'inet', NFT_TABLE]);
}

/** Whether the partition's rules are in place (for cleanup checks). */
export function isPartitioned(network: PartitionNetwork): boolean {
  try {
    return inNamespace(network, 'nft', ['list', 'tables']).includes(NFT_TABLE);
  } catch {
    return false;
  }
}

/** Deletes the namespace (its nftables rules and veth end go with it) and the root-side veth. Idempotent. */
export function destroyPartitionNetwork(network: PartitionNetwork): void {
  tryRun('ip', ['netns', 'exec', network.namespace, 'nft', 'delete', 'table', 'inet', NFT_TABLE]);
  tryRun('ip', ['netns', 'delete', network.namespace]);
  // Deleting either end deletes the pair; the root end may outlive the namespace by a moment.
  tryRun('ip', ['link', 'delete', network.hostVeth]);
}

/** Whether anything of this network is still on the machine (namespace or root-side veth). */
export function networkRemains(network: PartitionNetwork): boolean {
  const namespaces = run('ip', ['netns', 'list']);
  const links = run('ip', ['-o', 'link', 'show']);
  return (
    namespaces.includes(network.namespace) ||
    links.includes(`${network.hostVeth}@`) ||
    links.includes(`${network.hostVeth}:`)
  );
}
