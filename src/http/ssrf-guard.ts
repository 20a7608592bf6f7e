/**
 * The destination guard for webhook jobs. A scheduler that will POST to any URL is an open door
 * into the network it runs in (cloud metadata at 169.254.169.254, admin panels on 10.x, the
 * database on localhost), so every destination must pass two checks:
 *
 * 1. its host name matches the allowlist (`*` allows any public host, `*.example.com` a domain);
 * 2. every address it resolves to is public, unless its range is explicitly allowed.
 *
 * Check 2 runs at connect time, inside the socket's DNS lookup ({@link DestinationGuard.lookup}),
 * and the socket connects only to an address that passed; checking a name and then letting the
 * HTTP client resolve it again would let DNS rebinding swap in a private address in between.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { DocketError } from '../job/errors.js';

/** Settings of a {@link DestinationGuard}. */
export interface DestinationGuardOptions {
  /** Host names allowed: exact names, `*.domain` for subdomains, or `*` for any public host. */
  allowHosts: readonly string[];
  /** CIDR ranges (e.g. `127.0.0.1/32`, `10.0.0.0/8`) exempted from the private-address refusal. */
  allowAddresses?: readonly string[] | undefined;
}

/** Why a destination was refused. */
export class DestinationRefusedError extends DocketError {
  constructor(message: string) {
    super('destination_refused', message);
  }
}

/** Private, loopback, link-local, multicast and reserved ranges, refused by default. */
const PRIVATE_RANGES: [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['fec0::', 10, 'ipv6'],
];

function parseCidr(cidr: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const [address = '', prefixText] = cidr.trim().split('/');
  const version = isIP(address);
  if (version === 0) throw new Error(`"${cidr}" is not an IP address or CIDR range`);
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) {
    throw new Error(`"${cidr}" has an invalid prefix length (0 to ${max})`);
  }
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** The 16 bytes of an IPv6 address (`isIP(address) === 6` already holds), or null. */
function ipv6Bytes(address: string): number[] | null {
  let text = address.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  const tail: number[] = [];
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1] && dotted[2]) {
    text = dotted[1].endsWith('::') ? dotted[1] : dotted[1].slice(0, -1);
    tail.push(...dotted[2].split('.').map(Number));
  }
  const [head = '', rest] = text.split('::') as [string, string | undefined];
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const missing = 8 - tail.length / 2 - left.length - right.length;
  if (missing < 0 || (rest === undefined && missing !== 0)) return null;
  const words = [...left, ...new Array<number>(missing).fill(0), ...right];
  const bytes = words.flatMap((word) => [word >> 8, word & 255]);
  return [...bytes, ...tail];
}

const startsWith = (bytes: readonly number[], prefix: readonly number[]) => prefix.every((b, i) => bytes[i] === b);
const dottedQuad = (bytes: readonly number[]) => bytes.join('.');

/**
 * IPv6 forms that carry (or may be routed to) an IPv4 address, with the IPv4 address to check in
 * its place, or `refuse` for a form that is never a legitimate webhook destination:
 * - `::ffff:a.b.c.d` (IPv4-mapped) and `::ffff:0:a.b.c.d` (IPv4-translated, RFC 2765): the v4 inside;
 * - `64:ff9b::a.b.c.d` (NAT64, RFC 6052): the v4 inside; `64:ff9b:1::/48` (local NAT64): refused;
 * - `2002:AABB:CCDD::/16` (6to4): the v4 in bits 16 to 48;
 * - `::a.b.c.d` (IPv4-compatible, deprecated; `[::127.0.0.1]` reaches loopback on some stacks): refused;
 * - `2001:0::/32` (Teredo, whose v4 is obfuscated): refused.
 */
function embeddedIpv4(address: string): string | 'refuse' | null {
  const bytes = ipv6Bytes(address);
  if (bytes?.length !== 16) return 'refuse';
  const zeros = (n: number) => new Array<number>(n).fill(0);
  if (startsWith(bytes, [...zeros(10), 0xff, 0xff])) return dottedQuad(bytes.slice(12));
  if (startsWith(bytes, [...zeros(8), 0xff, 0xff, 0, 0])) return dottedQuad(bytes.slice(12));
  if (startsWith(bytes, [0, 0x64, 0xff, 0x9b, ...zeros(8)])) return dottedQuad(bytes.slice(12));
  if (startsWith(bytes, [0, 0x64, 0xff, 0x9b, 0, 1])) return 'refuse';
  if (startsWith(bytes, [0x20, 0x02])) return dottedQuad(bytes.slice(2, 6));
  if (startsWith(bytes, [0x20, 0x01, 0, 0])) return 'refuse';
  // ::/96 minus :: and ::1, which the blocked ranges name themselves.
  if (startsWith(bytes, zeros(12)) && !(bytes[12] === 0 && bytes[13] === 0 && bytes[14] === 0)) return 'refuse';
  return null;
}

/** Names that always mean this machine (RFC 6761), refused without asking DNS. */
function isLoopbackName(host: string): boolean {
  const name = host.replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/** Checks webhook destinations; see the file header. */
export class DestinationGuard {
  private readonly allowHosts: readonly string[];
  private readonly blocked = new BlockList();
  private readonly exempt = new BlockList();

  constructor(options: DestinationGuardOptions) {
    this.allowHosts = options.allowHosts.map((host) => host.trim().toLowerCase()).filter((host) => host !== '');
    for (const [address, prefix, family] of PRIVATE_RANGES) this.blocked.addSubnet(address, prefix, family);
    for (const cidr of options.allowAddresses ?? []) {
      const { address, prefix, family } = parseCidr(cidr);
      this.exempt.addSubnet(address, prefix, family);
    }
  }

  /** Validates a CIDR list the way the constructor will, for configuration errors. */
  static checkCidr(cidr: string): void {
    parseCidr(cidr);
  }

  /** Refuses a URL whose scheme or host name is not allowed (no DNS; addresses are checked at connect). */
  checkUrl(raw: string): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new DestinationRefusedError('is not a valid absolute URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new DestinationRefusedError(`scheme ${url.protocol} is not allowed (use http: or https:)`);
    }
    if (url.username !== '' || url.password !== '') {
      throw new DestinationRefusedError('must not carry credentials in the URL');
    }
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    if (!this.hostAllowed(host)) {
      throw new DestinationRefusedError(
        this.allowHosts.length === 0
          ? 'no webhook destinations are allowed (configure the webhook host allowlist)'
          : `host ${host} is not in the webhook allowlist`,
      );
    }
    if (isIP(host) !== 0) this.checkAddress(host);
    else if (isLoopbackName(host) && !this.exempt.check('127.0.0.1', 'ipv4') && !this.exempt.check('::1', 'ipv6')) {
      throw new DestinationRefusedError(`host ${host} always names this machine and is not allowed`);
    }
    return url;
  }

  /** Refuses a private, loopback or reserved address unless its range is exempt. */
  checkAddress(address: string): void {
    const family = isIP(address);
    if (family === 0) throw new DestinationRefusedError(`${address} is not an IP address`);
    const inner = family === 6 ? embeddedIpv4(address) : null;
    if (inner === 'refuse') {
      throw new DestinationRefusedError(`address ${address} is a reserved IPv6 form and is not allowed`);
    }
    const checked = inner ?? address;
    const checkedType: 'ipv4' | 'ipv6' = inner || family === 4 ? 'ipv4' : 'ipv6';
    if (this.blocked.check(checked, checkedType) && !this.exempt.check(checked, checkedType)) {
      throw new DestinationRefusedError(`address ${address} is private, loopback or reserved and is not allowed`);
    }
  }

  /**
   * A `lookup` for `http.request`: resolves the name, refuses it if ANY address fails
   * {@link checkAddress}, and hands the socket only checked addresses, so the address connected
   * to is the address checked.
   */
  readonly lookup = (
    hostname: string,
    options: { family?: number | string; all?: boolean },
    callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    const requested = options.family === 'IPv6' ? 6 : options.family === 'IPv4' ? 4 : Number(options.family ?? 0);
    const family = requested === 4 || requested === 6 ? requested : 0;
    dnsLookup(hostname, { all: true, family }, (error, addresses) => {
      if (error) return callback(error, []);
      try {
        if (addresses.length === 0) throw new DestinationRefusedError(`${hostname} has no addresses`);
        for (const entry of addresses) this.checkAddress(entry.address);
      } catch (refusal) {
        return callback(refusal as Error, []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0] as LookupAddress;
      return callback(null, first.address, first.family);
    });
  };

  private hostAllowed(host: string): boolean {
    return this.allowHosts.some((pattern) => {
      if (pattern === '*') return true;
      if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
      return host === pattern;
    });
  }
}
