import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { type LocalPooler, startPgbouncer } from "../../local/backends/pgbouncer.ts";
import { createEmptyDatabase } from "../support/db.ts";
import { withDatabase } from "../support/templateDatabase.ts";

/**
 * What needs a session, through pgbouncer in transaction mode (the stand-in for RDS Proxy): this file starts its
 * own pgbouncer in front of the harness's server, so it runs in every test run. The relay, order, purge, inbox
 * and CLI tests run through a pooler as a whole with `npm run test:pooler` (OUTBOX_TEST_POOLER=pgbouncer).
 */
let bouncer: LocalPooler;
beforeAll(async () => {
  bouncer = await startPgbouncer(inject("pgUrl"));
});
afterAll(async () => {
  await bouncer?.stop();
});

describe("through pgbouncer in transaction mode", () => {
  it("pools for real: two client connections run on one backend, so nothing of a session survives a transaction", async () => {
    const [a, b] = [new pg.Client(bouncer.url), new pg.Client(bouncer.url)];
    await a.connect();
    await b.connect();
    try {
      const pid = async (client: pg.Client) =>
        (await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]?.pid;
      expect(await pid(a)).toBe(await pid(b));
      await a.query("select set_config('application_name', 'set-by-a', false)");
      expect((await b.query("show application_name")).rows[0]?.application_name).toBe("set-by-a");
    } finally {
      await a.end();
      await b.end();
    }
  });

  it("applies the migrations, two runners at once, each file once, and leaves no advisory lock behind", async () => {
    const database = await createEmptyDatabase();
    const name = new URL(database.url).pathname.slice(1);
    const pools = [0, 1].map(
      () => new pg.Pool({ connectionString: withDatabase(bouncer.url, name), max: 2 }),
    );
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pool)));
      const applied = results.flatMap((result) => result.applied).sort();
      const all = [
        ...new Set(results.flatMap((result) => [...result.applied, ...result.alreadyApplied])),
      ].sort();
      expect(applied).toEqual(all);
      const direct = new pg.Client(database.url);
      await direct.connect();
      try {
        const { rows } = await direct.query<{ n: number }>(
          "select count(*)::integer as n from outbox_migrations group by name having count(*) > 1",
        );
        expect(rows).toEqual([]);
        const { rows: invalid } = await direct.query(
          "select indexrelid::regclass::text from pg_index where not indisvalid",
        );
        expect(invalid).toEqual([]);
        // A session-level lock taken through the pooler would stay on a pooled backend after the runner is done.
        // (This database's locks only: other test files migrate their own databases on the same server.)
        const { rows: locks } = await direct.query(`select pid from pg_locks where locktype = 'advisory'
           and database = (select oid from pg_database where datname = current_database())`);
        expect(locks).toEqual([]);
      } finally {
        await direct.end();
      }
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await database.drop();
    }
  });
});
