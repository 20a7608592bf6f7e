/**
 * A loopback TCP proxy between one PostgreSQL client and the server that can manufacture the
 * ambiguous commit: it forwards a chosen statement (Parse … Sync), lets the server run and commit
 * it, swallows the whole answer up to ReadyForQuery and then cuts both sockets. A chosen statement
 * inside a transaction block (BEGIN … COMMIT) is answered; the COMMIT that follows it is the one
 * whose answer is swallowed. The client sees
 * a dropped connection for a statement that did commit, which is the one case a retry must handle
 * without duplicating a job or an attempt (fault class 5).
 *
 * It understands just enough of the v3 wire protocol to frame messages: one untyped startup
 * message, then `type(1) length(4) body` both ways. SSL is not supported (pg does not ask for it
 * unless configured). Loopback only.
 */
import { createServer, type Server, Socket } from 'node:net';

/** A statement the proxy let commit and then hid from its client. */
export interface CommitCut {
  /** The statement's SQL, as sent in its Parse message. */
  sql: string;
  /** Its Bind parameters as text (null for SQL NULL). */
  params: (string | null)[];
  /** Host epoch ms when the answer was swallowed and the sockets were cut. */
  at: number;
  /** The server's answer contained an ErrorResponse, so the statement did not commit after all. */
  failed: boolean;
}

interface Pending {
  match: (sql: string) => boolean;
  resolve: (cut: CommitCut) => void;
}

interface Link {
  client: Socket;
  server: Socket;
}

const STARTUP_PROTOCOL = 196608;

/** Frames a byte stream into protocol messages, calling `onMessage(type, body)` for each. */
class MessageFramer {
  private buffer: Buffer = Buffer.alloc(0);
  private startupDone: boolean;

  constructor(
    expectStartup: boolean,
    private readonly onMessage: (type: string, body: Buffer) => void,
  ) {
    this.startupDone = !expectStartup;
  }

  push(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (!this.startupDone) {
        if (this.buffer.length < 8) return;
        const length = this.buffer.readInt32BE(0);
        if (this.buffer.length < length) return;
        const code = this.buffer.readInt32BE(4);
        this.buffer = this.buffer.subarray(length);
        if (code === STARTUP_PROTOCOL) this.startupDone = true;
        continue;
      }
      if (this.buffer.length < 5) return;
      const length = this.buffer.readInt32BE(1);
      if (this.buffer.length < 1 + length) return;
      const type = String.fromCharCode(this.buffer[0] ?? 0);
      const body = this.buffer.subarray(5, 1 + length);
      this.buffer = this.buffer.subarray(1 + length);
      this.onMessage(type, body);
    }
  }
}

function readCString(body: Buffer, offset: number): [string, number] {
  const end = body.indexOf(0, offset);
  return [body.toString('utf8', offset, end), end + 1];
}

function parseBindParams(body: Buffer): (string | null)[] {
  let offset = readCString(body, 0)[1];
  offset = readCString(body, offset)[1];
  const formatCount = body.readInt16BE(offset);
  offset += 2 + formatCount * 2;
  const paramCount = body.readInt16BE(offset);
  offset += 2;
  const params: (string | null)[] = [];
  for (let i = 0; i < paramCount; i += 1) {
    const length = body.readInt32BE(offset);
    offset += 4;
    if (length < 0) params.push(null);
    else {
      params.push(body.toString('utf8', offset, offset + length));
      offset += length;
    }
  }
  return params;
}

/** The proxy; `listen()` gives the port to put in the client's connection string. */
export class CommitCuttingProxy {
  private server: Server | undefined;
  private readonly links = new Set<Link>();
  private pending: Pending | undefined;
  /** Every cut made so far. */
  readonly cuts: CommitCut[] = [];

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Starts listening on 127.0.0.1 and resolves with the port. */
  async listen(): Promise<number> {
    this.server = createServer((client) => this.accept(client));
    const server = this.server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy: no TCP address');
    return address.port;
  }

  /**
   * Arms the next cut: the next statement whose SQL satisfies `match` commits and its answer is
   * swallowed. Resolves when the cut has happened. Replaces an earlier unfired arm.
   */
  arm(match: (sql: string) => boolean): Promise<CommitCut> {
    return new Promise((resolve) => {
      this.pending = { match, resolve };
    });
  }

  /** Withdraws an unfired arm. */
  disarm(): void {
    this.pending = undefined;
  }

  /** Cuts every open connection at once (a network blip). */
  cutAll(): number {
    const count = this.links.size;
    for (const link of [...this.links]) this.drop(link);
    return count;
  }

  /** Stops listening and cuts everything. */
  async close(): Promise<void> {
    this.pending = undefined;
    this.cutAll();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private drop(link: Link): void {
    this.links.delete(link);
    link.client.destroy();
    link.server.destroy();
  }

  private accept(client: Socket): void {
    const server = new Socket();
    const link: Link = { client, server };
    this.links.add(link);
    let statement: { sql: string; params: (string | null)[] } | undefined;
    let cutting: { sql: string; params: (string | null)[]; resolve: (cut: CommitCut) => void } | undefined;
    // A chosen statement run inside a transaction block commits with that transaction's COMMIT:
    // its answer goes through, and the COMMIT's answer is the one swallowed.
    let awaitingCommit: typeof cutting;
    // The server's transaction status after its last ReadyForQuery: 'I' idle, 'T' in a block.
    let transactionStatus = 'I';
    let swallowing = false;
    let failed = false;
    const isCommit = (sql: string) => /^\s*COMMIT\b/i.test(sql);

    const fromClient = new MessageFramer(true, (type, body) => {
      if (type === 'P') {
        const sql = readCString(body, readCString(body, 0)[1])[0];
        statement = { sql, params: [] };
      } else if (type === 'B' && statement) {
        statement.params = parseBindParams(body);
      } else if (type === 'S' && statement) {
        const pending = this.pending;
        if (awaitingCommit && isCommit(statement.sql)) {
          cutting = awaitingCommit;
          awaitingCommit = undefined;
        } else if (pending?.match(statement.sql) && !cutting && !awaitingCommit) {
          this.pending = undefined;
          if (transactionStatus === 'T') awaitingCommit = { ...statement, resolve: pending.resolve };
          else cutting = { ...statement, resolve: pending.resolve };
        }
        statement = undefined;
      } else if (type === 'Q' && awaitingCommit && isCommit(readCString(body, 0)[0])) {
        // pg sends BEGIN and COMMIT as simple queries.
        cutting = awaitingCommit;
        awaitingCommit = undefined;
      }
    });
    const fromServer = new MessageFramer(false, (type, body) => {
      if (type === 'Z') transactionStatus = String.fromCharCode(body[0] ?? 73);
      if (!swallowing) return;
      if (type === 'E') failed = true;
      if (type === 'Z' && cutting) {
        const cut: CommitCut = { sql: cutting.sql, params: cutting.params, at: Date.now(), failed };
        this.cuts.push(cut);
        this.drop(link);
        cutting.resolve(cut);
      }
    });

    client.on('data', (chunk: Buffer) => {
      fromClient.push(chunk);
      server.write(chunk);
      // From the Sync of the chosen statement on, the server's answer belongs to it: hide it.
      if (cutting) swallowing = true;
    });
    server.on('data', (chunk: Buffer) => {
      fromServer.push(chunk);
      if (!swallowing) client.write(chunk);
    });
    const close = () => this.drop(link);
    client.on('error', close);
    server.on('error', close);
    client.on('close', close);
    server.on('close', close);
    server.connect(this.targetPort, this.targetHost);
  }
}
