// The package's public API: what producers and operators import from "aws-outbox-relay".
export {
  createDatabasePool,
  type DatabasePool,
  type DatabaseSource,
  databaseSourceFromEnv,
} from "./connection.ts";
export type { Queryable, SessionPool } from "./db.ts";
export {
  type CreatedDestination,
  createDestination,
  type DestinationClientOptions,
} from "./destinations/create.ts";
export type { Destination, LoadedRow, Prepared, PublishResult } from "./destinations/destination.ts";
export { type EventBridgeOptions, eventBridgeDestination } from "./destinations/eventBridge.ts";
export {
  type DestinationSetting,
  destinationSettingFromEnv,
  type EventBridgeSetting,
  type SqsFifoSetting,
} from "./destinations/setting.ts";
export { type SqsFifoOptions, sqsFifoDestination } from "./destinations/sqsFifo.ts";
export { type EnqueuedEvent, type EnqueueOptions, enqueue, type OutboxEvent } from "./enqueue.ts";
export {
  ConfigError,
  MigrationError,
  OutboxError,
  PublishError,
  ValidationError,
} from "./errors.ts";
export { type OutboxLocation, outboxNames } from "./identifiers.ts";
export { type MigrateOptions, type MigrateResult, migrate } from "./migrate.ts";
export {
  DEFAULT_PURGE_OPTIONS,
  type PurgeDeps,
  type PurgeOptions,
  type PurgeSummary,
  readOutboxSnapshot,
  runPurge,
} from "./purge.ts";
export { type PurgeConfig, purgeConfigFromEnv } from "./purgeConfig.ts";
export {
  DEFAULT_RELAY_OPTIONS,
  type RelayDeps,
  type RelayOptions,
  type RelaySummary,
  type RoundReport,
  relayRound,
  runRelay,
} from "./relay.ts";
export { type RelayConfig, relayConfigFromEnv } from "./relayConfig.ts";
export { type EventTypeSnapshot, type OutboxSnapshot, outboxSnapshot } from "./sql/outboxSnapshot.ts";
export { MAX_HEADERS, SQS_MAX_MESSAGE_BYTES, STANDARD_ATTRIBUTES } from "./sqsMessage.ts";
