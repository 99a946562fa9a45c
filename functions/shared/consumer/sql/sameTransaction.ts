import type { Queryable } from "../../db/session.ts";
import { sqlState } from "../../db/sqlstate.ts";
import { TransactionControlError } from "../transactionGuard.ts";

/**
 * The server's word, just before the commit, that the session is still in the transaction that wrote the inbox
 * row (`xid`, from sql/recordInbox.ts): `pg_current_xact_id_if_assigned()` is that id inside it, and null or
 * another id in any transaction that began after it ended. Throws TransactionControlError otherwise, so the
 * record fails instead of committing what is not the record's transaction. The same statement marks the
 * commit that follows as the pipeline's (`outbox_inbox.commit`, transaction-local), which inbox migration 0005's
 * deferred trigger requires of a record's transaction: a COMMIT without it fails and rolls everything back.
 *
 * An aborted transaction (a handler that caught one of its own SQL errors) answers 25P02 here: left to the
 * commit, which Postgres answers with ROLLBACK and withTransaction turns into TransactionRolledBackError.
 */
export async function confirmSameTransaction(db: Queryable, xid: string): Promise<void> {
  let same: boolean | undefined;
  try {
    const result = await db.query<{ same: boolean }>(
      "select coalesce(pg_current_xact_id_if_assigned() = $1::xid8, false) as same, " +
        "set_config('outbox_inbox.commit', $1::text, true) as marked",
      [xid],
    );
    same = result.rows[0]?.same;
  } catch (error) {
    if (sqlState(error) === "25P02") return;
    throw error;
  }
  if (same !== true) {
    throw new TransactionControlError(
      `the session is no longer in the record's transaction (${xid}): a statement of the handler ended it; ` +
        "nothing is committed and the record fails",
    );
  }
}
