import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultMigrationsDir, migrate } from "../../functions/shared/db/migrate.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { useEmptyDatabases } from "../support/db.ts";
import { openSession } from "../support/sessions.ts";

const { emptyPool, cleanUpFirst } = useEmptyDatabases();

const BASE = ["0001_outbox_events.sql"];

/**
 * A relay round takes ROW SHARE on the outbox table with its claim (FOR UPDATE) and ROW EXCLUSIVE when it records
 * the outcomes, publishing in between. A migration that holds one lock on the table while it waits for a stronger
 * one (SHARE ROW EXCLUSIVE, then ADD COLUMN's ACCESS EXCLUSIVE, as 0006 once did) waits for that round, and the
 * round waits for it: Postgres breaks the cycle by aborting one (40P01), and the round it aborts had published.
 * Every migration file, applied one at a time over the previous ones, while a round is between its claim and its
 * record: the round must finish, the migration must apply. The round's deadlock_timeout is short, so on a cycle
 * the round is the one Postgres aborts, at once.
 */
describe("migrations and a relay round in flight", () => {
  it("never deadlock: each file takes its strongest lock on the outbox table first", async () => {
    const pool = await emptyPool();
    const stepDir = await mkdtemp(join(tmpdir(), "outbox-lock-upgrade-"));
    cleanUpFirst(() => rm(stepDir, { recursive: true, force: true }));
    for (const name of BASE) await copyFile(join(defaultMigrationsDir(), name), join(stepDir, name));
    await migrate(pool, { migrationsDir: stepDir });
    const files = (await readdir(defaultMigrationsDir()))
      .filter((name) => name.endsWith(".sql") && !BASE.includes(name))
      .sort();
    const round = await openSession(pool.options.connectionString as string);
    cleanUpFirst(() => round.client.end());

    const outcomes: { file: string; round: string; applied: string[] }[] = [];
    for (const file of files) {
      await pool.query(
        `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
         values ('order', 'o-1', 'order.created', '{}')`,
      );
      await round.client.query("begin");
      await round.client.query("set local deadlock_timeout = '50ms'");
      const { rows } = await round.client.query<{ id: string }>(
        `select id from outbox_events where processed_at is null order by seq limit 1 for update skip locked`,
      );
      await copyFile(join(defaultMigrationsDir(), file), join(stepDir, file));
      let settled = false;
      const migrating = migrate(pool, { migrationsDir: stepDir }).finally(() => {
        settled = true;
      });
      // The migration either waits for the round (its lock conflicts with ROW SHARE) or needs nothing it holds.
      await waitFor(
        `${file} to wait for the round or finish`,
        async () => {
          if (settled) return true;
          const { rows: blocked } = await pool.query(
            "select 1 from pg_stat_activity where $1::integer = any(pg_blocking_pids(pid))",
            [round.pid],
          );
          return blocked.length > 0;
        },
        10_000,
      );
      let recorded = "recorded";
      try {
        await round.client.query("update outbox_events set processed_at = now() where id = $1", [
          rows[0]?.id,
        ]);
        await round.client.query("commit");
      } catch (error) {
        recorded = (error as Error).message;
        await round.client.query("rollback");
      }
      outcomes.push({ file, round: recorded, applied: (await migrating).applied });
    }

    expect(outcomes).toEqual(files.map((file) => ({ file, round: "recorded", applied: [file] })));
  }, 120_000);
});
