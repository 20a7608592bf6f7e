/**
 * Typed submits by kind name through a declared DocketJobs map (issue 10, item 5). Compiled as a
 * program of its own (tsconfig.json beside this file, run by `npm run typecheck`): a declaration
 * merge applies to every file compiled with it, and the main program's untyped tests must keep
 * compiling. Augmenting the package entry point (src/index.ts) is exactly what an application
 * does with `declare module 'docket'`.
 */
import { expectTypeOf } from 'vitest';
import type { Docket, JsonValue, KindSubmitInput } from '../../../src/index.js';
import { defineJob } from '../../../src/index.js';

declare module '../../../src/index.js' {
  interface DocketJobs {
    'email.send': { to: string; subject?: string };
    'report.build': { reportId: number };
    'cache.flush': null;
  }
}

export function declaredCases(docket: Docket): void {
  // --- accepted: declared kinds with payloads of their types ---
  void docket.submit({ kind: 'email.send', payload: { to: 'ada@example.com' } });
  void docket.submit({ kind: 'report.build', payload: { reportId: 7 }, runAt: '2030-06-01T09:00:00Z' });
  void docket.submit({ kind: 'cache.flush' });
  void docket.submitMany([
    { kind: 'email.send', payload: { to: 'a', subject: 's' } },
    { kind: 'report.build', payload: { reportId: 1 }, priority: 2 },
  ]);
  void docket.schedule({ id: 'nightly', cron: '0 2 * * *', job: { kind: 'report.build', payload: { reportId: 1 } } });
  docket.handle('email.send', async (payload) => {
    expectTypeOf(payload).toEqualTypeOf<{ to: string; subject?: string }>();
  });
  docket.handle('cache.flush', async (payload) => expectTypeOf(payload).toEqualTypeOf<null>());
  expectTypeOf<KindSubmitInput<'report.build'>['payload']>().toEqualTypeOf<{ reportId: number }>();

  // Definitions work alongside the map.
  const ping = defineJob<{ at: string }>('ping');
  void docket.submit(ping.job({ at: 'now' }));
  docket.handle(ping, async (payload) => expectTypeOf(payload).toEqualTypeOf<{ at: string }>());

  // --- refused: a kind outside the map ---
  // @ts-expect-error a typo in the kind
  void docket.submit({ kind: 'email.sned', payload: { to: 'a' } });
  // @ts-expect-error a typo in submitMany
  void docket.submitMany([{ kind: 'report.biuld', payload: { reportId: 1 } }]);
  // @ts-expect-error a typo in a schedule's job
  void docket.schedule({ id: 'n', cron: '0 2 * * *', job: { kind: 'report.bild', payload: { reportId: 1 } } });
  // @ts-expect-error a typo in handle
  docket.handle('emial.send', async () => {});

  // --- refused: a payload of the wrong shape ---
  // @ts-expect-error reportId must be a number
  void docket.submit({ kind: 'report.build', payload: { reportId: '7' } });
  // @ts-expect-error the payload is required for a kind whose payload type has no null
  void docket.submit({ kind: 'email.send' });
  void docket.submitMany([
    { kind: 'email.send', payload: { to: 'a' } },
    // @ts-expect-error one wrong element in submitMany: each element is checked against its own kind
    { kind: 'report.build', payload: { to: 'a' } },
  ]);
  // @ts-expect-error a schedule's payload of the wrong shape
  void docket.schedule({ id: 'n', cron: '0 2 * * *', job: { kind: 'report.build', payload: { reportId: null } } });
  // @ts-expect-error a handler for the wrong payload type
  docket.handle('report.build', async (payload: { to: string }) => payload.to);
  // @ts-expect-error an explicit payload type no longer bypasses the map
  docket.handle<JsonValue>('report.build', async () => {});
}
