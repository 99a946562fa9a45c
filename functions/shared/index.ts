// The package's root entry: what a producer imports from "aws-outbox-relay" — the write API, its types, its errors
// and limits. It loads no AWS SDK and no relay code (invariant 12). The relay, purge, database and migration entry
// points are subpaths: "aws-outbox-relay/relay", "/purge", "/db", "/migrations"; the inbox is "/consumer" and the
// CDK construct "/cdk".
export type { Queryable } from "./db/session.ts";
export {
  ConfigError,
  MigrationError,
  NotMigratedError,
  OutboxError,
  ValidationError,
} from "./outbox/errors.ts";
export { DEFAULT_MAX_MESSAGE_BYTES, MAX_HEADERS, STANDARD_ATTRIBUTES } from "./outbox/message.ts";
export { type OutboxLocation, outboxNames } from "./outbox/names.ts";
export { type EnqueuedEvent, type EnqueueOptions, enqueue, type OutboxEvent } from "./produce/enqueue.ts";
export type {
  DrizzleTransactionHandle,
  KnexTransactionHandle,
  KyselyTransactionHandle,
  MikroOrmEntityManagerHandle,
  PgClientHandle,
  PostgresJsTransactionHandle,
  PrismaTransactionHandle,
  TransactionHandle,
  TypeOrmEntityManagerHandle,
  TypeOrmQueryRunnerHandle,
} from "./produce/transactionHandle.ts";
