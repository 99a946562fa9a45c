import { readdir } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { beforeEach, describe, expect, it } from "vitest";
import { defaultMigrationsDir } from "../../functions/shared/db/migrate.ts";
import { cliOf } from "../support/cli.ts";
import { cloneDatabase, createEmptyDatabase, useTestDatabase } from "../support/db.ts";
import { PRIVATE } from "../support/privateSchema.ts";

/** `outbox migrate`: the outbox's migrations, its limits row, and the inbox's (test/support/cli.ts runs it). */
const db = useTestDatabase();
const { outbox } = cliOf(db);

beforeEach(async () => {
  await db.pool.query("truncate outbox_events");
});

describe("outbox migrate", () => {
  it("applies the migrations to an empty database, then reports them as already applied", async () => {
    const empty = await createEmptyDatabase();
    try {
      const first = await outbox(["migrate"], { DATABASE_URL: empty.url });
      const second = await outbox(["migrate", "--json"], { DATABASE_URL: empty.url });
      const status = await outbox(["status"], { DATABASE_URL: empty.url });

      // Every file of the package's migrations folder, so a new migration needs no edit here.
      const files = (await readdir(defaultMigrationsDir())).filter((name) => name.endsWith(".sql")).sort();
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/applied\s+0001_outbox_events\.sql/);
      expect(first.stdout).toMatch(new RegExp(`applied ${files.length} migration`));
      expect(second.code).toBe(0);
      expect(JSON.parse(second.stdout)).toEqual({ applied: [], alreadyApplied: files });
      expect(status.code).toBe(0);
    } finally {
      await empty.drop();
    }
  });

  it("gives a database cloned from a migrated one roles of its own, and says what the operator does next", async () => {
    const template = await createEmptyDatabase();
    const made = await outbox(["migrate"], { DATABASE_URL: template.url });
    const clone = await cloneDatabase(template.name);
    try {
      const renewed = await outbox(["migrate"], { DATABASE_URL: clone.url });

      expect(made.code).toBe(0);
      expect(renewed.code).toBe(0);
      expect(renewed.stdout).toMatch(
        new RegExp(
          `roles renewed +relay: "outbox_relay:[0-9a-f]{32}:[0-9a-f]{8}" replaces "outbox_relay:${template.name}\\.public\\.outbox_events", ` +
            `which database ${template.name} also named; the new role has no members: grant it to this database's login`,
        ),
      );
      expect(renewed.stdout).toMatch(/roles renewed +purge: /);
    } finally {
      await clone.drop();
      await template.drop();
    }
  });
});

describe("outbox migrate --max-message-bytes / --max-payload-bytes / --claim-check", () => {
  it("writes the outbox's limits row the write API reads, only the values given, and refuses a bad one", async () => {
    const empty = await createEmptyDatabase();
    try {
      const set = await outbox(["migrate", "--max-message-bytes", "262144", "--json"], {
        DATABASE_URL: empty.url,
      });
      const claim = await outbox(["migrate", "--claim-check", "--max-payload-bytes", "8388608"], {
        DATABASE_URL: empty.url,
      });
      const bad = await outbox(["migrate", "--max-message-bytes", "2000000"], { DATABASE_URL: empty.url });

      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout).limits).toEqual({
        maxMessageBytes: 262_144,
        maxPayloadBytes: 1_048_576,
        claimCheck: false,
      });
      expect(claim.code).toBe(0);
      expect(claim.stdout).toMatch(/max_message_bytes 262144, max_payload_bytes 8388608, claim_check true/);
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toMatch(/--max-message-bytes.*expected an integer from 1024 to 1048576/);
      const client = new pg.Client({ connectionString: empty.url });
      await client.connect();
      const { rows } = await client.query(
        `select max_message_bytes, max_payload_bytes, claim_check from ${PRIVATE}.outbox_limits`,
      );
      await client.end();
      expect(rows).toEqual([{ max_message_bytes: 262_144, max_payload_bytes: 8_388_608, claim_check: true }]);
    } finally {
      await empty.drop();
    }
  });
});

describe("outbox migrate --inbox", () => {
  it("applies the inbox's migrations, with their own ledger, to the named table; not the outbox's", async () => {
    const empty = await createEmptyDatabase();
    try {
      // OUTBOX_TABLE is the outbox's location: --inbox must not read it.
      const first = await outbox(["migrate", "--inbox"], {
        DATABASE_URL: empty.url,
        OUTBOX_TABLE: "elsewhere",
      });
      const second = await outbox(["migrate", "--inbox", "--json"], { DATABASE_URL: empty.url });
      const named = await outbox(["migrate", "--inbox", "orders_inbox", "--json"], {
        DATABASE_URL: empty.url,
      });

      const files = (await readdir(join(defaultMigrationsDir(), "inbox"))).filter((name) =>
        name.endsWith(".sql"),
      );
      expect(files.length).toBeGreaterThan(0);
      expect(first.stderr).toBe("");
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(new RegExp(`"public"\\."inbox": applied ${files.length} migration`));
      expect(JSON.parse(second.stdout)).toEqual({ applied: [], alreadyApplied: files.sort() });
      expect(JSON.parse(named.stdout)).toEqual({ applied: files.sort(), alreadyApplied: [] });
      const client = new pg.Client({ connectionString: empty.url });
      await client.connect();
      const tables = await client
        .query<{ name: string }>(
          "select table_name as name from information_schema.tables where table_schema = 'public' order by 1",
        )
        .finally(() => client.end());
      const names = tables.rows.map((row) => row.name);
      expect(names).toEqual(
        expect.arrayContaining(["inbox", "inbox_migrations", "orders_inbox", "orders_inbox_migrations"]),
      );
      expect(names.filter((name) => name.startsWith("outbox"))).toEqual([]);
    } finally {
      await empty.drop();
    }
  });

  it("is in migrate's help, and refuses --table (the outbox's) beside it", async () => {
    const help = await outbox(["migrate", "--help"]);
    expect(help.stdout).toMatch(/--inbox \[table\]\s+apply the consumer's inbox migrations/);
    const both = await outbox(["migrate", "--inbox", "--table", "x"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--inbox.*cannot be used with.*--table/);
  });
});
