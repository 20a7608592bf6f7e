/**
 * Docket's public surface: re-exports only. The HTTP service is `docket/http` (src/http/index.ts).
 *
 * Only what an application uses is exported here: the Docket and its options, the error classes,
 * job and schedule types with their documented limits and defaults, events, and the Store contract
 * (experimental while 0.x, see src/store/store.ts). Docket's own helpers (spec normalisers, the
 * misfire and claim-kind planners, the retry arithmetic, URL parsing) stay internal; tests import
 * them from their own modules.
 */
export type { DocketOptions, SubmitOptions } from './docket.js';
export { DEFAULT_PRUNE_INTERVAL_MS, DEFAULT_RETENTION_MS, Docket } from './docket.js';
export { signWebhook, verifyWebhookSignature } from './http/webhook-signature.js';
export { BUILTIN_KINDS, BUILTIN_QUEUE, isBuiltinKind, WEBHOOK_KIND } from './job/builtin-kinds.js';
export {
  ConfigurationError,
  DocketError,
  DoNotRetryError,
  IdempotencyConflictError,
  RetryAfterError,
  SnoozeError,
  SubmitUnconfirmedError,
  ValidationError,
} from './job/errors.js';
export type { AttemptError, ClaimedJob, Job, JobState, JsonValue, RetryPolicy } from './job/job.js';
export { FINISHED_JOB_STATES, JOB_STATES, LIVE_JOB_STATES } from './job/job.js';
export type {
  AnyKindSubmitInput,
  DeclaredJobKind,
  DefinedJob,
  DefinedScheduleJob,
  DocketJobs,
  Instant,
  JobDefaults,
  JobKind,
  JobSubmitOptions,
  JsonCompatible,
  JsonPrimitive,
  KindScheduleJob,
  KindSubmitInput,
  PayloadOf,
} from './job/job-definition.js';
export { defineJob, JobDefinition } from './job/job-definition.js';
export type { BulkAction, JobFilter, ListOrder, PayloadEquality } from './job/job-filter.js';
export { BULK_ACTIONS, parsePayloadFilter } from './job/job-filter.js';
export type { JobSpec, SubmitInput } from './job/job-spec.js';
export { DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, DEFAULT_RETRY_POLICY } from './job/job-spec.js';
export type { RetryDecision } from './retry/backoff.js';
export type { Random } from './retry/random.js';
export { seededRandom } from './retry/random.js';
export type { RemoteWorkerRegistration } from './routing/worker-registration.js';
export { DEFAULT_REGISTRY_TTL_MS, MIN_REGISTRY_TTL_MS } from './routing/worker-registration.js';
export type { JitterMode } from './schedule/jitter.js';
export { JITTER_MODES } from './schedule/jitter.js';
export type {
  MisfirePolicy,
  MisfirePolicyName,
  Schedule,
  ScheduleInput,
  ScheduleInputWith,
  ScheduleJob,
  ScheduleJobInput,
  ScheduleJobTemplate,
  ScheduleSpec,
} from './schedule/schedule.js';
export {
  DEFAULT_MISFIRE_POLICY,
  MAX_CATCH_UP_RUNS,
  MAX_CATCH_UP_WINDOW_MS,
  MAX_SCHEDULE_ID_LENGTH,
  MAX_SCHEDULE_JITTER_MS,
  MISFIRE_POLICIES,
  SCHEDULE_ID_PATTERN,
} from './schedule/schedule.js';
export type { OpenStoreOptions } from './store/open-store.js';
export { openStore } from './store/open-store.js';
export type {
  ActivityBucket,
  BulkBatchResult,
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DueCountsParams,
  DueKindCount,
  FailOutcome,
  JobActivityParams,
  JobBulkApplyParams,
  JobCountParams,
  JobLease,
  JobListParams,
  KindFilter,
  ListPageParams,
  MatchCount,
  QueueCountField,
  QueueCounts,
  QueueCountsParams,
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
  WorkerRecord,
  WorkerRegistration,
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
  ParkedJob,
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
