import { join } from "node:path";
import { defaultMigrationsDir, type MigrateResult, migrate } from "../db/migrate.ts";
import { type SessionClient, type SessionPool, withTransaction } from "../db/session.ts";
import { type OutboxLocation, type OutboxNames, outboxNames } from "../outbox/names.ts";
import { checkIntegerOption } from "../util/env.ts";
import { purgeInboxBatch } from "./sql/purgeInbox.ts";

/** Where the inbox lives in the consumer's database. Validated and quoted like the outbox's names. */
export interface InboxLocation {
  /** Default `public`. */
  schema?: string;
  /** Default `inbox`. Its migrations ledger is `<table>_migrations` beside it. */
  table?: string;
}

export const DEFAULT_INBOX_TABLE = "inbox";

export function inboxNames(location: InboxLocation = {}): OutboxNames {
  const names: OutboxLocation = { table: location.table ?? DEFAULT_INBOX_TABLE };
  if (location.schema !== undefined) names.schema = location.schema;
  return outboxNames(names);
}

export interface MigrateInboxOptions extends InboxLocation {
  /** Folder of the inbox's migration files; default the package's `migrations/inbox/`. */
  migrationsDir?: string;
}

/**
 * Creates or updates the inbox table in the consumer's database: the outbox's migration runner (advisory lock,
 * checksums, forward-only) over the inbox's own set of files, with a ledger of its own, so the two sets never
 * mix even when a service keeps its outbox and its inbox in one database.
 */
export async function migrateInbox(
  pool: SessionPool,
  options: MigrateInboxOptions = {},
): Promise<MigrateResult> {
  const names = inboxNames(options);
  return migrate(pool, {
    schema: names.schema,
    table: names.table,
    migrationsDir: options.migrationsDir ?? join(defaultMigrationsDir(), "inbox"),
  });
}

export interface PurgeInboxOptions extends InboxLocation {
  /**
   * Rows are kept this long after processing. Default and minimum 1,008 (42 days): the latest a copy of an
   * applied event can still arrive. A copy can wait 14 days in a queue (SQS's longest retention), then 14 days
   * in a FIFO dead-letter queue, which restarts the clock ("For FIFO queues, the enqueue timestamp resets when
   * the message is moved to a dead-letter queue":
   * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/setting-up-dead-letter-queue-retention.html),
   * then a redrive makes it a new message with 14 more days ("The redrive task resets the retention period. All
   * redriven messages are considered new messages with a new messageID and enqueueTime":
   * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-configure-dead-letter-queue-redrive.html).
   * A second redrive restarts it again: `staleEvents: "skip"` (its mark is never purged) covers that.
   */
  retentionHours?: number;
  /** Rows per DELETE statement. Default 5,000 (1-50,000). */
  batchSize?: number;
  /** Statements per call. Default 20: one call deletes at most batchSize x maxBatches rows. */
  maxBatches?: number;
  /** statement_timeout of each statement. Default 10,000 ms. */
  statementTimeoutMs?: number;
}

export interface PurgeInboxResult {
  deletedRows: number;
  batches: number;
  /** false when the call stopped at maxBatches with old rows possibly left: call again. */
  drained: boolean;
}

/** Queue, FIFO dead-letter queue, redriven queue: 3 x SQS's longest retention of 14 days (see retentionHours). */
export const MIN_INBOX_RETENTION_HOURS = 3 * 14 * 24;
export const DEFAULT_INBOX_RETENTION_HOURS = MIN_INBOX_RETENTION_HOURS;

/**
 * Deletes inbox rows older than the retention, in bounded statements, each in a short transaction of its own
 * (nothing holds locks across batches). Returns after `maxBatches` statements or when none is left, so a
 * scheduled call has a known cost; a large backlog is worked off over several calls.
 */
export async function purgeInbox(
  pool: SessionPool,
  options: PurgeInboxOptions = {},
): Promise<PurgeInboxResult> {
  const retentionHours = options.retentionHours ?? DEFAULT_INBOX_RETENTION_HOURS;
  const batchSize = options.batchSize ?? 5_000;
  const maxBatches = options.maxBatches ?? 20;
  const statementTimeoutMs = options.statementTimeoutMs ?? 10_000;
  checkIntegerOption("retentionHours", retentionHours, MIN_INBOX_RETENTION_HOURS, 87_600);
  checkIntegerOption("batchSize", batchSize, 1, 50_000);
  checkIntegerOption("maxBatches", maxBatches, 1, 10_000);
  checkIntegerOption("statementTimeoutMs", statementTimeoutMs, 100, 900_000);
  const names = inboxNames(options);
  const result: PurgeInboxResult = { deletedRows: 0, batches: 0, drained: false };
  while (result.batches < maxBatches) {
    const deleted = await withTransaction(
      pool,
      (client: SessionClient) => purgeInboxBatch(client, names, { retentionHours, limit: batchSize }),
      { statementTimeoutMs },
    );
    result.batches++;
    result.deletedRows += deleted;
    if (deleted < batchSize) {
      result.drained = true;
      break;
    }
  }
  return result;
}
