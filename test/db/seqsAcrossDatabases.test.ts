import { execFileSync, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { checkOrderKey } from "../../functions/shared/relay/orderKey.ts";
import { POSTGRES_VERSIONS, type PostgresVersion } from "../../local/backends/docker.ts";
import { type LocalPostgres, startPostgres } from "../../local/backends/postgres.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { anEvent } from "../support/factories.ts";
import { withDatabase } from "../support/templateDatabase.ts";

/**
 * Issue 39, findings 3 and 5: seqs survive logical replication (an RDS Blue/Green deployment with a major version
 * upgrade) and a rows-only restore, following docs/operations.md ("Restores and Blue/Green switchovers") as
 * written. Both need a server of their own: logical replication needs wal_level = logical, and pg_dump dumps
 * only servers of its own major or older, so the server runs the harness's major or pg_dump's, whichever is
 * older. pg_dump and psql are the client binaries on PATH.
 */
const names = outboxNames();
let server: LocalPostgres;
let workDir: string;
const pools: pg.Pool[] = [];

function clientMajor(binary: string): number {
  const found = spawnSync(binary, ["--version"], { encoding: "utf8" });
  if (found.error !== undefined || found.status !== 0) {
    throw new Error(
      `${binary} is needed to test the documented restore (docs/operations.md) and was not found on PATH: ` +
        "install the Postgres client binaries (Debian/Ubuntu: `apt-get install -y postgresql-client`)",
    );
  }
  const major = /\(PostgreSQL\) (\d+)/.exec(found.stdout)?.[1];
  if (major === undefined) throw new Error(`${binary} --version said ${JSON.stringify(found.stdout)}`);
  return Number(major);
}

function serverMajor(): PostgresVersion {
  const dump = Math.min(clientMajor("pg_dump"), clientMajor("psql"));
  const wanted = Math.min(Number(inject("pgVersion")), dump);
  const version = POSTGRES_VERSIONS.find((major) => Number(major) === wanted);
  if (version === undefined) {
    throw new Error(`pg_dump ${dump} is older than every supported major (${POSTGRES_VERSIONS.join(", ")})`);
  }
  return version;
}

beforeAll(async () => {
  server = await startPostgres(undefined, {
    backend: "embedded",
    version: serverMajor(),
    serverSettings: ["wal_level=logical", "max_replication_slots=10", "max_wal_senders=10"],
  });
  workDir = await mkdtemp(join(tmpdir(), "outbox-restore-"));
}, 120_000);

afterAll(async () => {
  for (const pool of pools) await pool.end();
  await server?.stop();
  if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
});

/** A migrated outbox in a new database of the server. */
async function outboxDatabase(name: string): Promise<{ url: string; pool: pg.Pool }> {
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = withDatabase(server.url, name);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  // The server stops at the end with idle sessions open: their 57P01 must not crash the worker.
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  pools.push(pool);
  await migrate(pool);
  return { url, pool };
}

async function write(pool: pg.Pool, aggregateId: string, count = 1): Promise<void> {
  for (let i = 0; i < count; i++) {
    await withTransaction(pool, (client) => enqueue(client, [anEvent({ aggregateId, payload: { i } })]));
  }
}

async function seqsOf(pool: pg.Pool): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ id: string; seq: string }>("select id, seq::text from outbox_events");
  return new Map(rows.map((row) => [row.id, row.seq]));
}

/** The order the relay's claim follows: per group, by seq. */
async function groupOrder(pool: pg.Pool, group: string): Promise<number[]> {
  const { rows } = await pool.query(
    "select payload->>'i' as i from outbox_events where aggregate_id = $1 order by seq",
    [group],
  );
  return rows.map((row) => Number(row.i));
}

const checkOrder = (pool: pg.Pool) => withTransaction(pool, (client) => checkOrderKey(client, names));

describe("a Blue/Green switchover with logical replication (finding 3)", () => {
  it("keeps blue's seqs on green: each group stays in order, above every seq blue handed out", async () => {
    const blue = await outboxDatabase("blue");
    const green = await outboxDatabase("green");
    // Blue has been busy: its sequence is well ahead of green's, which stays where green was created.
    await write(blue.pool, "busy", 20);
    const { port } = new URL(server.url);
    await blue.pool.query("create publication outbox for table public.outbox_events");
    // A subscription to a database of the same cluster needs its slot made first (CREATE SUBSCRIPTION docs).
    await blue.pool.query("select pg_create_logical_replication_slot('outbox', 'pgoutput')");
    await green.pool.query(
      `create subscription outbox
       connection 'host=127.0.0.1 port=${port} user=postgres password=outbox dbname=blue'
       publication outbox with (create_slot = false, slot_name = 'outbox')`,
    );
    await write(blue.pool, "G-1");
    await write(blue.pool, "busy", 3);
    await write(blue.pool, "G-2");

    // The documented switchover: writes to blue stopped, green caught up, replication ended.
    const blueSeqs = await seqsOf(blue.pool);
    await waitFor(
      "green to apply blue's rows",
      async () => (await seqsOf(green.pool)).size === blueSeqs.size,
      30_000,
    );
    const { rows: last } = await blue.pool.query("select last_value::text from outbox_events_seq_seq");
    await green.pool.query("alter subscription outbox disable");
    await green.pool.query("alter subscription outbox set (slot_name = none)");
    await green.pool.query("drop subscription outbox");
    await blue.pool.query("select pg_drop_replication_slot('outbox')");
    // docs/operations.md: on green, setval past blue's last_value with a margin.
    await green.pool.query("select setval('outbox_events_seq_seq', $1::bigint + 1000000)", [
      last[0].last_value,
    ]);

    expect(await seqsOf(green.pool)).toEqual(blueSeqs);
    await expect(checkOrder(green.pool)).resolves.toBeUndefined();
    await write(green.pool, "G-3");
    const { rows } = await green.pool.query(
      "select aggregate_id, seq from outbox_events where aggregate_id like 'G-%' order by seq",
    );
    expect(rows.map((row) => row.aggregate_id)).toEqual(["G-1", "G-2", "G-3"]);
    expect(BigInt(rows[2].seq)).toBeGreaterThan(BigInt(last[0].last_value));
  }, 120_000);

  it("keeps the seq of rows applied before green's sequence was raised, and raises it past them", async () => {
    const blue = await outboxDatabase("blue_early");
    const green = await outboxDatabase("green_early");
    await write(blue.pool, "busy", 10);
    const client = await green.pool.connect();
    try {
      // As a subscription's apply worker runs.
      await client.query("set session_replication_role = replica");
      const { rows } = await blue.pool.query("select * from outbox_events order by seq desc limit 1");
      await client.query(
        `insert into outbox_events overriding system value
         select * from json_populate_record(null::outbox_events, $1::json)`,
        [JSON.stringify(rows[0])],
      );
      const { rows: state } = await client.query("select last_value::text from outbox_events_seq_seq");
      expect(state[0].last_value).toBe(String(rows[0].seq));
    } finally {
      await client.query("reset session_replication_role");
      client.release();
    }
    await expect(checkOrder(green.pool)).resolves.toBeUndefined();
  }, 60_000);
});

describe("a rows-only restore into a fresh outbox (finding 5)", () => {
  /** A source whose rows are on disk out of seq order: an early event of G updated after later ones were written. */
  async function source() {
    const source = await outboxDatabase("restore_source");
    await write(source.pool, "G", 3);
    await write(source.pool, "other", 50);
    await source.pool.query(
      "update outbox_events set attempts = 1, last_error = repeat('x', 2000) where aggregate_id = 'G' and payload->>'i' = '0'",
    );
    const { rows } = await source.pool.query("select aggregate_id from outbox_events order by ctid limit 3");
    expect(rows.map((row) => row.aggregate_id)).not.toEqual(["G", "G", "G"]);
    return source;
  }

  /** docs/operations.md, "Restoring rows": the dump, as written there. */
  function dump(url: string): string {
    const file = join(workDir, `rows-${Date.now()}.sql`);
    execFileSync("pg_dump", [
      "--data-only",
      "--table=public.outbox_events",
      `--table="${names.privateSchema}".outbox_group_high_water`,
      `--file=${file}`,
      url,
    ]);
    return file;
  }

  function replay(file: string, url: string, env: Record<string, string> = {}) {
    return spawnSync("psql", ["--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-f", file, url], {
      encoding: "utf8",
      env: { ...process.env, ...env },
    });
  }

  it("keeps every row's seq, so each group keeps its order and the relay's check passes", async () => {
    const from = await source();
    const to = await outboxDatabase("restore_target");
    const file = dump(from.url);

    const replayed = replay(file, to.url, { PGOPTIONS: "-c session_replication_role=replica" });

    expect(replayed.stderr).toBe("");
    expect(replayed.status).toBe(0);
    expect(await seqsOf(to.pool)).toEqual(await seqsOf(from.pool));
    expect(await groupOrder(to.pool, "G")).toEqual([0, 1, 2]);
    await expect(checkOrder(to.pool)).resolves.toBeUndefined();
    const { rows } = await to.pool.query("select max(seq)::text as seq from outbox_events");
    await write(to.pool, "G");
    expect(await groupOrder(to.pool, "G")).toEqual([0, 1, 2, 0]);
    const { rows: newest } = await to.pool.query("select max(seq)::text as seq from outbox_events");
    expect(BigInt(newest[0].seq)).toBeGreaterThan(BigInt(rows[0].seq));
  }, 60_000);

  it("is refused without replica mode, naming the command, instead of renumbering rows in the order they arrive", async () => {
    const to = await outboxDatabase("restore_plain");
    const file = dump(withDatabase(server.url, "restore_source"));

    const replayed = replay(file, to.url);

    expect(replayed.status).not.toBe(0);
    expect(replayed.stderr).toMatch(/carries a seq above the \d+ its outbox would give it/);
    expect(replayed.stderr).toMatch(/PGOPTIONS='-c session_replication_role=replica' psql/);
    const { rows } = await to.pool.query("select count(*)::int as n from outbox_events");
    expect(rows[0].n).toBe(0);
  }, 60_000);
});
