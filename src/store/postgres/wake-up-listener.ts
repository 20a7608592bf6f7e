/**
 * LISTEN for wake-ups on a dedicated connection (a pooled connection would lose the LISTEN when
 * returned). The connection can die at any time (server restart, pg_terminate_backend, network):
 * an 'error' handler keeps that from crashing the process, and the listener reconnects with
 * capped exponential backoff, jittered so a fleet whose database just restarted does not
 * reconnect in lockstep, and LISTENs again. A notification sent while disconnected is lost for
 * good, so every reconnect tells the subscribers `{runAt: null}` ("look again") and they claim
 * once; until then the workers' ordinary polling finds every due job.
 */
import pg from 'pg';
import type { WakeUp } from '../store.js';
import { parseWakeUpPayload } from '../wake-up.js';

/** How a {@link WakeUpListener} connects and whom it tells. */
export interface WakeUpListenerOptions {
  /** Connection settings for the dedicated LISTEN client. */
  connection: pg.ClientConfig;
  /** The NOTIFY channel (case-sensitive; quoted in LISTEN). */
  channel: string;
  /** Called for every wake-up; exceptions are swallowed so one bad subscriber cannot kill the listener. */
  onWakeUp: (wakeUp: WakeUp) => void;
  /** First reconnect delay (default 100 ms), doubled per failed attempt up to `maxReconnectDelayMs`. */
  minReconnectDelayMs?: number;
  /** Reconnect delay cap (default 5000 ms): bounds how long wake-ups stay off after a database restart. */
  maxReconnectDelayMs?: number;
  /** Source of the reconnect jitter, in [0, 1) (default Math.random); tests pass a seeded one. */
  random?: () => number;
  /** Told when the LISTEN connection is lost (`false`) and when it listens again (`true`), once per change. */
  onListeningChange?: (listening: boolean) => void;
}

/**
 * The delay before reconnect attempt `failures + 1`: exponential from `minMs`, capped at `maxMs`,
 * then "equal jitter" (half fixed, half random), so the delay lies in [step/2, step]: never a
 * zero-delay storm against a database still recovering, and a fleet never retries in lockstep.
 */
export function reconnectDelayMs(failures: number, minMs: number, maxMs: number, random: () => number): number {
  const step = Math.min(maxMs, minMs * 2 ** Math.min(failures, 30));
  return Math.round(step / 2 + (step / 2) * random());
}

/** A self-healing LISTEN connection that turns notifications into {@link WakeUp}s. */
export class WakeUpListener {
  private readonly options: WakeUpListenerOptions;
  private client: pg.Client | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private closed = false;
  private connecting: Promise<void> | null = null;
  /** Whether subscribers were last told the connection is listening (changes are reported once). */
  private listening = false;

  constructor(options: WakeUpListenerOptions) {
    this.options = options;
  }

  /**
   * Connects and LISTENs. Resolves once listening, or once the first attempt failed (it then
   * keeps retrying in the background): a database that is briefly down must not fail a worker's
   * start, since polling covers for lost wake-ups.
   */
  async start(): Promise<void> {
    await this.connect(false);
  }

  /** Stops listening and reconnecting; leaves no timer or socket behind. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = null;
    }
    // A connect in flight would otherwise finish after close and leave its socket open.
    if (this.connecting) await this.connecting;
    const client = this.client;
    this.client = null;
    if (client) await client.end().catch(() => {});
  }

  private connect(announce: boolean): Promise<void> {
    const attempt = this.attemptConnect(announce).finally(() => {
      this.connecting = null;
    });
    this.connecting = attempt;
    return attempt;
  }

  private async attemptConnect(announce: boolean): Promise<void> {
    // The store passes its keepalive and connect-timeout settings (postgresClientConfig 'listen');
    // these defaults serve a listener built on its own.
    const client = new pg.Client({
      application_name: 'docket-listener',
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      connectionTimeoutMillis: 10_000,
      ...this.options.connection,
    });
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', (message) => {
      if (message.channel !== this.options.channel) return;
      this.emit(parseWakeUpPayload(message.payload));
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.options.channel.replace(/"/g, '""')}"`);
    } catch {
      await client.end().catch(() => {});
      this.scheduleReconnect();
      return;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.failures = 0;
    this.setListening(true);
    if (announce) this.emit({ runAt: null });
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    this.setListening(false);
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private setListening(listening: boolean): void {
    if (this.listening === listening || this.closed) return;
    this.listening = listening;
    try {
      this.options.onListeningChange?.(listening);
    } catch {
      // A reporting bug must not stop the reconnect loop.
    }
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const delayMs = reconnectDelayMs(
      this.failures,
      this.options.minReconnectDelayMs ?? 100,
      this.options.maxReconnectDelayMs ?? 5000,
      this.options.random ?? Math.random,
    );
    this.failures++;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.closed) void this.connect(true);
    }, delayMs);
  }

  private emit(wakeUp: WakeUp): void {
    try {
      this.options.onWakeUp(wakeUp);
    } catch {
      // A subscriber's bug must not take down the LISTEN connection's event handler.
    }
  }
}
