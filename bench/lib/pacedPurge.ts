import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { DEFAULT_PURGE_OPTIONS } from "../../functions/shared/purge/purge.ts";
import { purgePublished } from "../../functions/shared/purge/sql/purgePublished.ts";

/**
 * A preview of a paced purge, for the purge-interference comparison: runPurge's own DELETE
 * (sql/purgePublished.ts), batch size and transaction shape, but after each batch it pauses as long as the
 * batch took, so the purge's backend is busy half the time instead of all of it. Not an engine feature;
 * the bench measures what pacing would buy before anyone builds it.
 */
export async function pacedPurge(
  pool: pg.Pool,
  retentionHours: number,
): Promise<{ deletedRows: number; durationMs: number }> {
  const names = outboxNames();
  const { batchSize, statementTimeoutMs } = DEFAULT_PURGE_OPTIONS;
  const { rows } = await pool.query<{ before: Date }>(
    "select now() - $1::integer * interval '1 hour' as before",
    [retentionHours],
  );
  const before = rows[0]?.before;
  if (before === undefined) throw new Error("no purge cutoff");
  const started = performance.now();
  let deletedRows = 0;
  for (;;) {
    const batchStarted = performance.now();
    const deleted = await withTransaction(pool, async (client) => {
      await client.query(
        `select set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true),
                set_config('idle_in_transaction_session_timeout', $1, true)`,
        [String(statementTimeoutMs)],
      );
      return purgePublished(client, names, { before, limit: batchSize });
    });
    deletedRows += deleted;
    if (deleted < batchSize) break;
    await new Promise((resolve) => setTimeout(resolve, performance.now() - batchStarted));
  }
  return { deletedRows, durationMs: performance.now() - started };
}
