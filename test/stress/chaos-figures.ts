/**
 * The figures a chaos run prints, as text: shared by `npm run chaos` (chaos.ts) and the tests
 * that run the harness (test/failover/failover.test.ts). Kept apart from chaos.ts, which is a
 * script: importing it would start a run.
 */
import type { ChaosResult } from './chaos-run.js';
import { formatScheduleSlots } from './schedule-slot-checker.js';

/** Formats a result as the figures the issue asks for. */
export function formatFigures(result: ChaosResult): string {
  const f = result.figures;
  const lines = [
    `store                         ${result.options.store}${result.shardPorts ? ` (sharded over ${result.shardPorts.length} clusters: ports ${result.shardPorts.join(', ')})` : ''}`,
    `seed                          ${result.options.seed}`,
    `fault phase                   ${Math.round(result.faultPhaseMs / 1000)} s, drain ${Math.round(result.drainMs / 1000)} s (${result.drained ? 'drained' : 'NOT DRAINED'})`,
    `jobs submitted                ${f.jobsSubmitted} (done ${f.jobsDone}, parked ${f.jobsParked}: poison ${f.poisonJobsParked}, healthy ${f.healthyJobsParked} ${JSON.stringify(f.healthyParkedBy)})`,
    `handler starts                ${f.handlerStarts}`,
    `kills (kill -9)               ${f.kills} (+ ${f.poisonExits} poison-job exits)`,
    `pauses (SIGSTOP past lease)   ${f.pauses} (+ ${f.freezes} fleet freezes: every worker, 3-9 s)`,
    `database restarts             ${f.restarts}${result.shardPorts ? ' (one shard at a time: kill -9 or stop -m immediate, then start)' : ''}`,
    `connections terminated        ${f.connectionsTerminated}`,
    `ambiguous commits             ${f.ambiguousCommits}`,
    `stale results refused         ${f.staleResultsRefused} ${JSON.stringify(f.staleByOperation)}`,
    `  of which accepted earlier   ${f.completionsReportedStaleButAccepted} (complete retried after an ambiguous commit)`,
    `jobs finished twice           ${f.jobsFinishedTwice} (must be 0)`,
    `stale results accepted        ${f.staleResultsAccepted} (must be 0)`,
    `effects that ran twice        ${f.effectsRanTwice} (allowed: at-least-once)`,
    `jobs lost                     ${f.jobsLost} (must be 0)`,
    `jobs started early            ${f.jobsStartedEarly} (must be 0)`,
    `retries before their backoff  ${f.retriesBeforeBackoff} (must be 0)`,
    `overlapping leases seen       ${f.overlappingLeases} (must be 0)`,
    `duplicate idempotency keys    ${f.duplicateKeys}`,
    `worst recovery after a kill   ${f.worstRecoveryAfterKillMs ?? '-'} ms (bound ${f.recoveryBoundMs} ms; ${f.recoveriesMeasured} measured; during a restart or freeze: ${f.worstRecoveryDuringRestartMs ?? '-'} ms)`,
    `  after a further lost claim  ${f.worstRecoveryAfterLostClaimMs ?? '-'} ms (${f.recoveriesAfterLostClaim} such)`,
    ...formatScheduleSlots({ ...f.recurring, violations: [] }),
    `submit retries                ${result.submitRetries}`,
    `worker exits not by nemesis   ${result.unexpectedWorkerExits} (must be 0)`,
    ...formatFailovers(result),
    `violations                    ${result.violations.length}`,
  ];
  return lines.join('\n');
}

/** One line per failover: what happened and how long each phase took. */
export function formatFailovers(result: ChaosResult): string[] {
  if (result.failovers.length === 0) return [];
  const worst = (values: (number | null)[]) => Math.max(...values.map((v) => v ?? Number.POSITIVE_INFINITY));
  const kills = result.failovers.filter((f) => f.action === 'leaderKill');
  const switchovers = result.failovers.filter((f) => f.action === 'switchover');
  return [
    `failovers                     ${kills.length} leader kills, ${switchovers.length} switchovers`,
    `  kill -> first claim         worst ${kills.length ? worst(kills.map((f) => f.firstClaimAfterMs)) : '-'} ms (writable: worst ${kills.length ? worst(kills.map((f) => f.writableAfterMs)) : '-'} ms)`,
    `  switchover -> first claim   worst ${switchovers.length ? worst(switchovers.map((f) => f.firstClaimAfterMs)) : '-'} ms (writable: worst ${switchovers.length ? worst(switchovers.map((f) => f.writableAfterMs)) : '-'} ms)`,
    ...result.failovers.map(
      (f) =>
        `  ${f.action.padEnd(10)} ${f.from} -> ${f.to}: writable ${f.writableAfterMs} ms, first claim ${f.firstClaimAfterMs ?? '-'} ms, healthy ${f.healthyAfterMs} ms`,
    ),
  ];
}
