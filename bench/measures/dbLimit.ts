import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { claimBatch } from "../../functions/shared/relay/sql/claimBatch.ts";
import { type Retention, recordOutcomes } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";

/**
 * (1) The database's ceiling for one relay: the relay's own claim and record statements, in the same
 * transaction shape as relayRound (begin, transaction-local timeouts, claim, one UPDATE marking every row
 * published, commit), one round after another on one session, but nothing published in between.
 * Rows per second over a whole drain of the backlog. `retention` is the record's (OUTBOX_RETENTION): mark or delete.
 */
export async function measureDbLimit(
  pool: pg.Pool,
  shape: BacklogShape,
  batchSize: number,
  retention: Retention = "keep",
): Promise<number> {
  await resetOutbox(pool);
  await seedBacklog(pool, shape);
  const names = outboxNames();
  const { statementTimeoutMs, publishTimeoutMs } = DEFAULT_RELAY_OPTIONS;
  const started = performance.now();
  let marked = 0;
  for (;;) {
    const claimed = await withTransaction(pool, async (client) => {
      await client.query(
        `select set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true),
                set_config('idle_in_transaction_session_timeout', $3, true)`,
        [
          String(statementTimeoutMs),
          String(statementTimeoutMs),
          String(publishTimeoutMs + statementTimeoutMs),
        ],
      );
      const rows = await claimBatch(client, names, { limit: batchSize, strictOrder: false });
      await recordOutcomes(
        client,
        names,
        rows.map((row) => ({ id: row.id, published: true })),
        retention,
      );
      return rows.length;
    });
    if (claimed === 0) break;
    marked += claimed;
  }
  const seconds = (performance.now() - started) / 1000;
  if (marked !== shape.events) throw new Error(`db limit marked ${marked} of ${shape.events} rows`);
  return marked / seconds;
}
