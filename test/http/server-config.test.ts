import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isLoopbackHost, loadServerConfig } from '../../src/http/server-config.js';

const dir = mkdtempSync(join(tmpdir(), 'docket-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configFile(content: unknown): string {
  const path = join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('loadServerConfig', () => {
  it('applies defaults when nothing is given', () => {
    expect(loadServerConfig({})).toMatchObject({
      db: 'sqlite:docket.db',
      host: '127.0.0.1',
      port: 8080,
      tokens: [],
      concurrency: 10,
      leaseMs: 30_000,
      bodyLimitBytes: 1024 * 1024,
      logLevel: 'info',
      webhookSecret: undefined,
      webhookAllowHosts: [],
    });
  });

  it('takes flags over environment over file', () => {
    const file = configFile({ port: 7000, concurrency: 3, logLevel: 'debug', db: 'sqlite:from-file.db' });
    const config = loadServerConfig({
      flags: { port: '9000' },
      env: { DOCKET_PORT: '8000', DOCKET_CONCURRENCY: '4' },
      file,
    });
    expect(config).toMatchObject({ port: 9000, concurrency: 4, logLevel: 'debug', db: 'sqlite:from-file.db' });
  });

  it('finds the file through --config or $DOCKET_CONFIG', () => {
    const file = configFile({ port: 7001 });
    expect(loadServerConfig({ flags: { config: file } }).port).toBe(7001);
    expect(loadServerConfig({ env: { DOCKET_CONFIG: file } }).port).toBe(7001);
  });

  it('parses tokens from the compact environment form and from JSON', () => {
    const config = loadServerConfig({
      env: { DOCKET_TOKENS: 'ops:admin+read:s3cret-with:colons-123 ci:submit:ci-secret-0123456789' },
    });
    expect(config.tokens).toEqual([
      { name: 'ops', scopes: ['admin', 'read'], token: 's3cret-with:colons-123' },
      { name: 'ci', scopes: ['submit'], token: 'ci-secret-0123456789' },
    ]);
    const json = loadServerConfig({
      env: { DOCKET_TOKENS: JSON.stringify([{ name: 'w', token: 'worker-secret-0123456', scopes: ['worker'] }]) },
    });
    expect(json.tokens[0]?.scopes).toEqual(['worker']);
  });

  it.each([
    [{ flags: { port: '80a' } }, /^port \(from --port\): must be an integer from 0 to 65535, got "80a"/],
    [{ flags: { port: '70000' } }, /^port \(from --port\): must be an integer from 0 to 65535/],
    [{ env: { DOCKET_PORT: '-1' } }, /^port \(from \$DOCKET_PORT\)/],
    [{ flags: { db: 'mysql://x' } }, /^db \(from --db\): must be a store URL/],
    [{ flags: { logLevel: 'loud' } }, /^logLevel \(from --log-level\): must be one of fatal, error/],
    [{ flags: { leaseMs: '10' } }, /^leaseMs \(from --lease-ms\): must be at least 1000/],
    [{ flags: { queues: 'ok,bad queue' } }, /^queues\[1\] \(from --queues\): queue names/],
    [
      { flags: { webhookAllowAddresses: '10.0.0.0/33' } },
      /^webhookAllowAddresses\[0\] \(from --webhook-allow-addresses\): .*prefix/,
    ],
    [
      { env: { DOCKET_TOKENS: 'ops:root:secret-secret-secret' } },
      /^tokens\[0\]\.scopes\[0\] \(from \$DOCKET_TOKENS\): must be one of submit, read, admin, worker/,
    ],
    [
      { env: { DOCKET_TOKENS: 'ops:admin:short' } },
      /^tokens\[0\]\.token \(from \$DOCKET_TOKENS\): must be at least 16 characters/,
    ],
    [
      { env: { DOCKET_WEBHOOK_SECRET: 'short' } },
      /^webhookSecret \(from \$DOCKET_WEBHOOK_SECRET\): must be at least 16/,
    ],
    [
      { flags: { host: '0.0.0.0' } },
      /^host \(from --host\): refusing to listen on non-loopback address 0\.0\.0\.0 without authentication/,
    ],
  ])('refuses %j with a message naming the setting', (input, message) => {
    expect(() => loadServerConfig(input)).toThrow(message);
  });

  it('never echoes a token secret in an error', () => {
    const secret = 'sup3r-s3cret-value-that-must-not-leak';
    let message = '';
    try {
      loadServerConfig({ env: { DOCKET_TOKENS: `ops:nope:${secret}` } });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/tokens/);
    expect(message).not.toContain(secret);
  });

  it('names the file for unreadable, malformed or unknown settings', () => {
    expect(() => loadServerConfig({ file: join(dir, 'missing.json') })).toThrow(
      /config file .*missing\.json: cannot be read \(ENOENT\)/,
    );
    expect(() => loadServerConfig({ file: configFile('{port: 1') })).toThrow(/is not valid JSON/);
    expect(() => loadServerConfig({ file: configFile({ prot: 1 }) })).toThrow(/unknown setting "prot"/);
    expect(() => loadServerConfig({ file: configFile({ port: 'x' }) })).toThrow(
      /^port \(from "port" in the config file\)/,
    );
  });

  it('allows a non-loopback host once tokens are configured, and refuses duplicate token names', () => {
    const tokens = [
      { name: 'a', token: 'aaaaaaaaaaaaaaaaaaaa', scopes: ['read'] },
      { name: 'b', token: 'bbbbbbbbbbbbbbbbbbbb', scopes: ['admin'] },
    ];
    expect(loadServerConfig({ flags: { host: '0.0.0.0' }, file: configFile({ tokens }) }).host).toBe('0.0.0.0');
    expect(() => loadServerConfig({ file: configFile({ tokens: [tokens[0], tokens[0]] }) })).toThrow(/used twice/);
  });

  it('recognises loopback hosts', () => {
    for (const host of ['127.0.0.1', '127.8.9.10', '::1', '[::1]', 'localhost'])
      expect(isLoopbackHost(host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '128.0.0.1'])
      expect(isLoopbackHost(host)).toBe(false);
  });
});
