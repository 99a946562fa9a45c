// "aws-outbox-relay/purge": retention of published rows and the outbox snapshot behind the alarms, for hosts
// other than the bundled purge Lambda.

export { readOutboxSnapshot } from "../observe/snapshot.ts";
export {
  type EventTypeSnapshot,
  type OutboxSnapshot,
  outboxSnapshot,
} from "../observe/sql/outboxSnapshot.ts";
export { type PurgeInvocationDeps, purgeInvocation } from "./invocation.ts";
export {
  DEFAULT_PURGE_OPTIONS,
  type PurgeDeps,
  type PurgeOptions,
  type PurgeSummary,
  runPurge,
} from "./purge.ts";
export { type PurgeConfig, purgeConfigFromEnv } from "./settings.ts";
