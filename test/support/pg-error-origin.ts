/**
 * Test-only diagnostics (a vitest setup file): a pg client that receives an error while nothing
 * listens for its 'error' event crashes the test process, and the stack Node prints then is the
 * protocol parser's, which names no client. One CI run ended with such an error (57P01, a
 * shard cluster stopped with a fast shutdown) that could not be traced to its client. Here every
 * client remembers where it connected, and such an error is rethrown naming the client's port,
 * application_name and that stack, so the next occurrence says whose connection it was.
 * Nothing changes for a client with a listener.
 */
import pg from 'pg';

const CONNECTED_AT = Symbol('docket.test.pgConnectedAt');

type TracedClient = pg.Client & {
  [CONNECTED_AT]?: string;
  port?: number;
  connectionParameters?: { application_name?: string };
};

const connect = pg.Client.prototype.connect;
pg.Client.prototype.connect = function (this: TracedClient, ...args: unknown[]) {
  this[CONNECTED_AT] = new Error('connected here').stack?.split('\n').slice(2, 18).join('\n');
  return (connect as (...a: unknown[]) => unknown).apply(this, args);
} as typeof connect;

const emit = pg.Client.prototype.emit;
pg.Client.prototype.emit = function (this: TracedClient, event: string | symbol, ...args: unknown[]): boolean {
  if (event === 'error' && this.listenerCount('error') === 0) {
    const cause = args[0] as Error | undefined;
    const error = new Error(
      `a pg client with no 'error' listener received: ${cause?.message ?? String(cause)} ` +
        `(port ${this.port}, application_name ${JSON.stringify(this.connectionParameters?.application_name ?? '')}); ` +
        `it connected at:\n${this[CONNECTED_AT] ?? '(unknown)'}`,
      { cause },
    );
    throw error;
  }
  return emit.call(this, event, ...args);
};
