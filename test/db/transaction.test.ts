import { describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { TransactionRolledBackError } from "../../functions/shared/outbox/errors.ts";
import { useTestDatabase } from "../support/db.ts";

const db = useTestDatabase();

describe("withTransaction", () => {
  it("throws when COMMIT is answered with ROLLBACK (an error was caught inside), and nothing was written", async () => {
    await db.pool.query("create table tx_probe (id int primary key)");
    const outcome = withTransaction(db.pool, async (client) => {
      await client.query("insert into tx_probe values (1)");
      // The caller's own code catches a statement error: the transaction is now aborted.
      await client.query("insert into tx_probe values (1)").catch(() => {});
      return "done";
    });
    await expect(outcome).rejects.toBeInstanceOf(TransactionRolledBackError);
    const { rows } = await db.pool.query("select count(*)::int as n from tx_probe");
    expect(rows[0].n).toBe(0);
  });

  it("runs read committed whatever default_transaction_isolation the database sets", async () => {
    const client = await db.pool.connect();
    // The stand-in pool below must not release the session; the test does, with the real release.
    const release = client.release.bind(client);
    try {
      await client.query("set default_transaction_isolation = 'repeatable read'");
      const pool = { connect: async () => Object.assign(client, { release: () => {} }) };
      const level = await withTransaction(pool, async (session) => {
        const { rows } = await session.query("show transaction_isolation");
        return rows[0].transaction_isolation;
      });
      expect(level).toBe("read committed");
    } finally {
      await client.query("reset default_transaction_isolation");
      release();
    }
  });
});
