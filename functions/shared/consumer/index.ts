// The consumer's public API: what services reading the outbox's queue import from "aws-outbox-relay/consumer".

export type { MigrateResult } from "../db/migrate.ts";
export type { Queryable, SessionClient, SessionPool } from "../db/session.ts";
export type { InboxEvent } from "./inboxEvent.ts";
export {
  createInboxHandler,
  InboxDeadlineError,
  type InboxHandler,
  type InboxLambdaHandler,
  type InboxStreamHandler,
  InboxUnavailableError,
} from "./inboxHandler.ts";
export type { InboxLogger } from "./inboxLogger.ts";
export {
  DEFAULT_CONSUMER,
  DEFAULT_GROUP_CONCURRENCY,
  DEFAULT_INBOX_STATEMENT_TIMEOUT_MS,
  DEFAULT_MAX_ATTEMPTS,
  type InboxHandlerOptions,
} from "./inboxOptions.ts";
export type { InboxRecord } from "./inboxRecord.ts";
export {
  DEFAULT_INBOX_RETENTION_HOURS,
  type InboxLocation,
  type MigrateInboxOptions,
  migrateInbox,
  type PurgeInboxOptions,
  type PurgeInboxResult,
  purgeInbox,
} from "./inboxTable.ts";
export type { KinesisEvent, KinesisRecord } from "./kinesisEvent.ts";
export {
  type InboxClient,
  kyselyPoolOf,
  type OneSessionPool,
  pgClientOf,
  prismaPoolOf,
} from "./libraries.ts";
export { type InboxMetrics, OUTCOME_METRIC, type OutcomeStatus } from "./outcomeMetrics.ts";
export { parseInboxEvent } from "./parseInboxEvent.ts";
export type { PayloadParser, StandardSchemaV1 } from "./payloadParser.ts";
export type { RecordOutcome } from "./recordOutcome.ts";
export {
  type InboxHandlerContext,
  type InboxRecordHandler,
  type InboxRoute,
  type InboxRoutes,
  inboxRoute,
  UnroutedEventError,
} from "./router.ts";
export type { LambdaContextLike, SqsBatchResponse, SqsEvent, SqsRecord } from "./sqsEvent.ts";
export { TransactionControlError } from "./transactionGuard.ts";
