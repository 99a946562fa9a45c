import { spawnSync } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { migrateInbox } from "../../functions/shared/consumer/index.ts";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { createEmptyDatabase } from "../support/db.ts";

const REPOSITORY = realpathSync(new URL("../..", import.meta.url));
const project = realpathSync(mkdtempSync(join(tmpdir(), "drizzle-kit-app-")));
symlinkSync(join(REPOSITORY, "node_modules"), join(project, "node_modules"));
// The service's own Drizzle schema: one table of its own, nothing of the outbox's.
writeFileSync(
  join(project, "schema.mjs"),
  `import { integer, pgTable, text } from "drizzle-orm/pg-core";
export const orders = pgTable("orders", {
  id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
  customer: text("customer").notNull(),
});
`,
);
afterAll(() => rmSync(project, { recursive: true, force: true }));

function drizzleKitPush(url: string, config: Record<string, unknown>) {
  writeFileSync(
    join(project, "drizzle.config.mjs"),
    `export default ${JSON.stringify({ dialect: "postgresql", schema: "./schema.mjs", dbCredentials: { url }, ...config })};\n`,
  );
  return spawnSync(
    join(REPOSITORY, "node_modules", ".bin", "drizzle-kit"),
    ["push", "--config", "drizzle.config.mjs", "--force", "--verbose"],
    { cwd: project, encoding: "utf8", timeout: 120_000 },
  );
}

async function objects(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      `select n.nspname || '.' || c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where c.relkind in ('r', 'S', 'p') and n.nspname not in ('pg_catalog', 'information_schema') order by 1`,
    );
    return rows.map((row) => row.name);
  } finally {
    await client.end();
  }
}

async function withDatabase(
  schema: string | undefined,
  work: (url: string, before: string[]) => Promise<void>,
) {
  const database = await createEmptyDatabase();
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  try {
    await migrate(pool, schema === undefined ? {} : { schema });
    await migrateInbox(pool, schema === undefined ? {} : { schema });
    await work(database.url, await objects(database.url));
  } finally {
    await pool.end();
    await database.drop();
  }
}

/**
 * docs/libraries.md "Schema tools": drizzle-kit, run for real (the devDependency) against the harness's Postgres.
 * `push --force` approves every statement it proposes, so whatever it would drop, it tries to drop.
 */
describe("drizzle-kit push beside the outbox", () => {
  it("in public, even with tablesFilter excluding the outbox's tables, it drops the outbox's sequence", async () => {
    await withDatabase(undefined, async (url) => {
      const push = drizzleKitPush(url, { tablesFilter: ["!outbox_*", "!inbox*"] });
      // tablesFilter filters tables only: the seq column's sequence is proposed for dropping. Postgres refuses only
      // because the column still depends on it (2BP01); a `generated ... as identity` or an unowned one would go.
      expect(push.stdout).toContain('DROP SEQUENCE "public"."outbox_events_seq_seq"');
      expect(`${push.stdout}${push.stderr}`).toMatch(/cannot drop sequence outbox_events_seq_seq/);
    });
  }, 180_000);

  it("with the outbox and the inbox in a schema of their own, creates the service's table and touches nothing else", async () => {
    await withDatabase("outbox", async (url, before) => {
      const push = drizzleKitPush(url, {});
      expect(push.status, `${push.stdout}${push.stderr}`).toBe(0);
      expect(push.stdout).not.toMatch(/\bDROP\b|outbox|inbox/i);
      expect((await objects(url)).sort()).toEqual(
        [...before, "public.orders", "public.orders_id_seq"].sort(),
      );
      expect(before).toEqual(
        expect.arrayContaining([
          "outbox.outbox_events",
          "outbox.outbox_events_seq_seq",
          "outbox.outbox_migrations",
          "outbox_private:outbox.outbox_events.outbox_roles",
          "outbox.inbox",
          "outbox.inbox_migrations",
        ]),
      );
    });
  }, 180_000);
});
