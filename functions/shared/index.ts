// The package's public API: what producers and operators import from "aws-outbox-relay".
export {
  createDatabasePool,
  type DatabasePool,
  type DatabaseSource,
  databaseSourceFromEnv,
} from "./db/connection.ts";
export { type MigrateOptions, type MigrateResult, migrate } from "./db/migrate.ts";
export type { Queryable, SessionPool } from "./db/session.ts";
export {
  type CreatedDestination,
  createDestination,
  type DestinationClientOptions,
} from "./destinations/create.ts";
export type { Destination, LoadedRow, Prepared, PublishResult } from "./destinations/destination.ts";
export { type EventBridgeOptions, eventBridgeDestination } from "./destinations/eventBridge/eventBridge.ts";
export {
  type DestinationSetting,
  destinationSettingFromEnv,
  type EventBridgeSetting,
  type SqsFifoSetting,
} from "./destinations/setting.ts";
export { type SqsFifoOptions, sqsFifoDestination } from "./destinations/sqs/sqsFifo.ts";
export { type EventTypeSnapshot, type OutboxSnapshot, outboxSnapshot } from "./observe/sql/outboxSnapshot.ts";
export {
  ConfigError,
  MigrationError,
  OutboxError,
  PublishError,
  ValidationError,
} from "./outbox/errors.ts";
export { DEFAULT_MAX_MESSAGE_BYTES, MAX_HEADERS, STANDARD_ATTRIBUTES } from "./outbox/message.ts";
export { type OutboxLocation, outboxNames } from "./outbox/names.ts";
export { type EnqueuedEvent, type EnqueueOptions, enqueue, type OutboxEvent } from "./produce/enqueue.ts";
export {
  DEFAULT_PURGE_OPTIONS,
  type PurgeDeps,
  type PurgeOptions,
  type PurgeSummary,
  readOutboxSnapshot,
  runPurge,
} from "./purge/purge.ts";
export { type PurgeConfig, purgeConfigFromEnv } from "./purge/settings.ts";
export {
  DEFAULT_RELAY_OPTIONS,
  type RelayDeps,
  type RelayOptions,
  type RelaySummary,
  type RoundReport,
  relayRound,
  runRelay,
} from "./relay/engine.ts";
export { type RelayConfig, relayConfigFromEnv } from "./relay/settings.ts";
