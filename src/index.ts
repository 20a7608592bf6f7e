/** Docket's public surface: re-exports only. The HTTP service is `docket/http` (src/http/index.ts). */
export type { DocketOptions, SubmitOptions } from './docket.js';
export { DEFAULT_PRUNE_INTERVAL_MS, DEFAULT_RETENTION_MS, Docket } from './docket.js';
export { signWebhook, verifyWebhookSignature } from './http/webhook-signature.js';
export { ConfigurationError, DocketError, ValidationError } from './job/errors.js';
export type { AttemptError, ClaimedJob, Job, JobState, JsonValue, RetryPolicy } from './job/job.js';
export { FINISHED_JOB_STATES, JOB_STATES, LIVE_JOB_STATES } from './job/job.js';
export type { JobSpec, SubmitInput } from './job/job-spec.js';
export { DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, DEFAULT_RETRY_POLICY, normalizeSubmit } from './job/job-spec.js';
export type { RetryDecision } from './retry/backoff.js';
export { backoffBand, decideAfterFailure, retryDelayMs } from './retry/backoff.js';
export type { Random } from './retry/random.js';
export { seededRandom } from './retry/random.js';
export type { JitterMode } from './schedule/jitter.js';
export { JITTER_MODES } from './schedule/jitter.js';
export type { MisfirePlan, PlannedRun } from './schedule/misfire.js';
export { planScheduleRuns } from './schedule/misfire.js';
export type {
  MisfirePolicy,
  MisfirePolicyName,
  Schedule,
  ScheduleInput,
  ScheduleJobInput,
  ScheduleJobTemplate,
  ScheduleSpec,
} from './schedule/schedule.js';
export {
  DEFAULT_MISFIRE_POLICY,
  jobSpecForRun,
  MAX_CATCH_UP_RUNS,
  MAX_CATCH_UP_WINDOW_MS,
  MAX_SCHEDULE_ID_LENGTH,
  MAX_SCHEDULE_JITTER_MS,
  MISFIRE_POLICIES,
  normalizeScheduleSpec,
  SCHEDULE_ID_PATTERN,
} from './schedule/schedule.js';
export type { OpenStoreOptions, StoreLocation } from './store/open-store.js';
export { openStore, parseStoreUrl } from './store/open-store.js';
export type {
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  FailOutcome,
  JobLease,
  JobListParams,
  QueueNameParams,
  QueueState,
  QueueStats,
  ReleaseOutcome,
  ScheduleIdParams,
  ScheduleListParams,
  ScheduleRepairParams,
  ScheduleUpsertParams,
  ScheduleUpsertResult,
  Store,
  StoreCapabilities,
  SubmitResult,
  WakeUp,
} from './store/store.js';
export type {
  ClaimedEvent,
  CompletedEvent,
  DocketEventListener,
  DocketEventMap,
  DocketEventName,
  ErrorEvent,
  FailedEvent,
  LeaseLostEvent,
  ParkedEvent,
  StaleEvent,
  StartedEvent,
  SubmittedEvent,
} from './worker/docket-events.js';
export { DocketEvents } from './worker/docket-events.js';
export type { AbortReason, JobContext, JobHandler } from './worker/job-handler.js';
export { JobAbortError, StaleLeaseError } from './worker/job-handler.js';
export type { LogFields, Logger } from './worker/logger.js';
export { silentLogger } from './worker/logger.js';
export { SCHEDULE_REPAIR_INTERVAL_MS } from './worker/schedule-repairer.js';
export type { WorkerStats } from './worker/worker.js';
export { Worker } from './worker/worker.js';
export type { ResolvedWorkerOptions, WorkerOptions } from './worker/worker-options.js';
export { DEFAULT_LEASE_MS } from './worker/worker-options.js';
