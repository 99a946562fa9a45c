// The consumer's public API: what services reading the outbox's queue import from "aws-outbox-relay/consumer".
export type { Queryable, SessionClient, SessionPool } from "../db.ts";
export type { MigrateResult } from "../migrate.ts";
export { type InboxEvent, parseInboxEvent } from "./inboxEvent.ts";
export {
  createInboxHandler,
  DEFAULT_GROUP_CONCURRENCY,
  type InboxHandlerContext,
  type InboxHandlerOptions,
  type InboxLambdaHandler,
  type InboxLogger,
  type InboxRecordHandler,
  type InboxRoutes,
  InboxUnavailableError,
  type RecordOutcome,
  UnroutedEventError,
} from "./inboxHandler.ts";
export {
  DEFAULT_INBOX_RETENTION_HOURS,
  type InboxLocation,
  type MigrateInboxOptions,
  migrateInbox,
  type PurgeInboxOptions,
  type PurgeInboxResult,
  purgeInbox,
} from "./inboxTable.ts";
export type { LambdaContextLike, SqsBatchResponse, SqsEvent, SqsRecord } from "./sqsEvent.ts";
