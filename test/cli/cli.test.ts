import { type ChildProcess, spawn } from "node:child_process";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { defaultMigrationsDir } from "../../functions/shared/db/migrate.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { freePort } from "../../local/backends/freePort.ts";
import { createEmptyDatabase, useTestDatabase } from "../support/db.ts";
import { createBusToQueue, eventBridgeClient } from "../support/eventBridge.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

const CLI = new URL("../../cli/outbox.ts", import.meta.url).pathname;
const db = useTestDatabase();
const sqs = sqsClient();

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment a user would have: none of this machine's outbox, database or AWS settings leak in. */
function cliEnv(overrides: Env = {}): Env {
  const env: Env = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(DATABASE_|OUTBOX_|RELAY_|PURGE_|AWS_|TEST_)/.test(name)) env[name] = value;
  }
  return {
    ...env,
    DATABASE_URL: db.url,
    AWS_REGION: LOCAL_AWS.region,
    AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
    ...overrides,
  };
}

function startCli(args: string[], env: Env = {}): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { env: cliEnv(env), stdio: ["ignore", "pipe", "pipe"] });
}

function outbox(args: string[], env: Env = {}): Promise<Run> {
  return finished(startCli(args, env));
}

function finished(child: ChildProcess): Promise<Run> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function insertDeadLetter(row: { eventType?: string; aggregateId?: string; attempts?: number }) {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, attempts, last_error, dead_lettered_at)
     values ('order', $1, $2, '{"n": 1}', $3, 'SQS rejected the message: InvalidParameterValue: no', now())
     returning id`,
    [row.aggregateId ?? "order-1", row.eventType ?? "order.created", row.attempts ?? 10],
  );
  return rows[0]?.id as string;
}

async function rowState(id: string) {
  const { rows } = await db.pool.query(
    `select attempts, last_error, dead_lettered_at, processed_at, available_at <= now() as available
     from outbox_events where id = $1`,
    [id],
  );
  return rows[0];
}

beforeEach(async () => {
  await db.pool.query("truncate outbox_events");
});

describe("outbox CLI: client-side query timeouts", () => {
  it("status, dead-letters and redrive give up on a database that does not answer, naming the bound", async () => {
    // A migration's ACCESS EXCLUSIVE lock: every read of the table waits behind it.
    const blocker = await db.pool.connect();
    try {
      await blocker.query("begin");
      await blocker.query("lock table outbox_events in access exclusive mode");
      const started = Date.now();
      const runs = await Promise.all([
        outbox(["status", "--query-timeout-ms", "1000"]),
        outbox(["dead-letters", "--query-timeout-ms", "1000"]),
        outbox(["redrive", "--all", "--query-timeout-ms", "1000"]),
      ]);
      for (const run of runs) {
        expect(run.code).toBe(1);
        expect(run.stderr).toMatch(/did not answer/);
      }
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
  });
});

describe("outbox CLI: every command", () => {
  it("prints --help and exits 0", async () => {
    const commands = ["migrate", "relay", "status", "dead-letters", "redrive", "purge", "dev"];

    const runs = await Promise.all([outbox(["--help"]), ...commands.map((name) => outbox([name, "--help"]))]);

    for (const run of runs) expect(run.code).toBe(0);
    expect(runs[0]?.stdout).toMatch(/Commands:[\s\S]*migrate[\s\S]*relay[\s\S]*dead-letters/);
    expect(runs[2]?.stdout).toMatch(/--queue-url[\s\S]*--drain[\s\S]*--batch-size/);
    expect(runs[2]?.stdout).toMatch(/env OUTBOX_QUEUE_URL/);
  });

  it("rejects a bad flag value with the flag's name and exit code 2", async () => {
    const run = await outbox(["relay", "--batch-size", "5000"]);

    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /--batch-size <n>' argument '5000' is invalid. expected an integer from 1 to 1000/,
    );
  });
});

describe("outbox CLI: connection errors", () => {
  it("names an unreachable database, without a stack trace, and exits 1", async () => {
    const url = `postgres://nobody:secret@127.0.0.1:${await freePort()}/nowhere?sslmode=disable`;

    const run = await outbox(["status"], { DATABASE_URL: url });

    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/cannot connect to 127\.0\.0\.1:\d+\/nowhere: connection refused/);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(run.stderr).not.toContain("secret");
  });

  it("warns when --database-url carries a password, and not when the URL comes from the environment", async () => {
    const url = `postgres://nobody:secret@127.0.0.1:${await freePort()}/nowhere?sslmode=disable`;
    const passwordless = `postgres://nobody@127.0.0.1:${await freePort()}/nowhere?sslmode=disable`;

    const flag = await outbox(["status", "--database-url", url]);
    const env = await outbox(["status"], { DATABASE_URL: url });
    const noPassword = await outbox(["status", "--database-url", passwordless]);

    expect(flag.stderr).toMatch(
      /warning: --database-url contains a password.*set DATABASE_URL in the environment/,
    );
    expect(env.stderr).not.toMatch(/warning/);
    expect(noPassword.stderr).not.toMatch(/warning/);
  });

  it("adds the stack and causes with --verbose", async () => {
    const url = `postgres://nobody@127.0.0.1:${await freePort()}/nowhere?sslmode=disable`;

    const run = await outbox(["dead-letters", "--verbose"], { DATABASE_URL: url });

    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/\n\s+at /);
    expect(run.stderr).toMatch(/caused by: Error: connect ECONNREFUSED/);
  });

  it("says which variable to set when no database is configured, exit 2", async () => {
    const run = await outbox(["status"], { DATABASE_URL: undefined });

    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/set DATABASE_URL .* or DATABASE_SECRET_ARN/);
  });

  it("tells to run `outbox migrate` when the outbox table is missing", async () => {
    const empty = await createEmptyDatabase();
    try {
      const run = await outbox(["status"], { DATABASE_URL: empty.url });

      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/"public"\."outbox_events" does not exist .*run `outbox migrate`/);
    } finally {
      await empty.drop();
    }
  });
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

describe("outbox status", () => {
  it("reports pending, oldest age, dead letters, blocked aggregates and each event type", async () => {
    await enqueueCommitted(db.pool, [
      anEvent({ eventType: "order.created" }),
      anEvent({ eventType: "order.paid" }),
    ]);
    await insertDeadLetter({ eventType: "order.created", aggregateId: "dead-1" });
    await db.pool.query(
      "update outbox_events set created_at = now() - interval '90 seconds' where event_type = 'order.paid'",
    );
    const updated = Date.now();

    const json = await outbox(["status", "--json"]);
    const text = await outbox(["status"]);

    expect(json.code).toBe(0);
    const status = JSON.parse(json.stdout);
    expect(status).toMatchObject({ pending: 2, deadLetters: 1, blockedAggregates: 1 });
    expect(status.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(90);
    expect(status.byEventType).toEqual([
      expect.objectContaining({ eventType: "order.created", pending: 1, deadLetters: 1 }),
      expect.objectContaining({ eventType: "order.paid", pending: 1, deadLetters: 0 }),
    ]);
    expect(text.code).toBe(0);
    // The age grows while the two commands run (seconds each on a loaded machine): between 90 s and then.
    const age = Number(/pending\s+2 \(oldest (\d+) s\)/.exec(text.stdout)?.[1]);
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThanOrEqual(90 + Math.ceil((Date.now() - updated) / 1000));
    expect(text.stdout).toMatch(new RegExp(`order\\.paid\\s+1\\s+${age} s\\s+0`));
  });
});

describe("outbox dead-letters", () => {
  it("lists dead letters with id, type, aggregate, attempts and last error; filters and limits", async () => {
    const first = await insertDeadLetter({ eventType: "order.created", aggregateId: "order-a", attempts: 7 });
    const second = await insertDeadLetter({ eventType: "order.shipped", aggregateId: "order-b" });
    await enqueueCommitted(db.pool, anEvent());

    const all = await outbox(["dead-letters"]);
    const byType = await outbox(["dead-letters", "--event-type", "order.shipped", "--json"]);
    const byAggregate = await outbox(["dead-letters", "--aggregate-id", "order-a", "--json"]);
    const limited = await outbox(["dead-letters", "--limit", "1"]);

    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(
      new RegExp(`${first}\\s+order\\.created\\s+order/order-a\\s+7\\s+\\S+Z\\s+SQS rejected`),
    );
    expect(all.stdout).toContain(second);
    expect(all.stdout).toMatch(/2 dead letter\(s\)/);
    expect(JSON.parse(byType.stdout)).toMatchObject({ total: 1, deadLetters: [{ id: second }] });
    expect(JSON.parse(byAggregate.stdout)).toMatchObject({
      total: 1,
      deadLetters: [{ id: first, attempts: 7 }],
    });
    expect(limited.stdout).toMatch(/showing 1 of 2 dead letters/);
  });

  it("escapes control characters in the table, and keeps the exact text in --json", async () => {
    // A row written by hand: an escape sequence that would clear the operator's screen, and a C1 control.
    const hostile = "order-\u001b[2J\u001b[31mred\u009b";
    const id = await insertDeadLetter({ aggregateId: hostile });
    await db.pool.query("update outbox_events set last_error = $1 where id = $2", [
      "boom\u0007\u202eevil",
      id,
    ]);

    const text = await outbox(["dead-letters"]);
    const json = await outbox(["dead-letters", "--json"]);

    for (const raw of ["\u001b", "\u0007", "\u009b", "\u202e"]) expect(text.stdout).not.toContain(raw);
    expect(text.stdout).toContain("order/order-\\u001b[2J\\u001b[31mred\\u009b");
    expect(text.stdout).toContain("boom\\u0007\\u202eevil");
    expect(JSON.parse(json.stdout).deadLetters[0]).toMatchObject({
      aggregate_id: hostile,
      last_error: "boom\u0007\u202eevil",
    });
  });

  it("says so when there are none", async () => {
    const run = await outbox(["dead-letters"]);

    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe("no dead letters");
  });
});

describe("outbox redrive", () => {
  it("refuses to run without a selector, or with an id that is not a UUID, and changes nothing", async () => {
    const id = await insertDeadLetter({});

    const bare = await outbox(["redrive"]);
    const badId = await outbox(["redrive", "--id", "42"]);
    const conflicting = await outbox(["redrive", "--all", "--event-type", "order.created"]);

    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/say which dead letters to redrive: --id/);
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/"42" is not an outbox id/);
    expect(conflicting.code).toBe(2);
    expect((await rowState(id)).dead_lettered_at).toBeInstanceOf(Date);
  });

  it("--dry-run shows what would change and changes nothing", async () => {
    const id = await insertDeadLetter({});

    const run = await outbox(["redrive", "--all", "--dry-run"]);

    expect(run.code).toBe(0);
    expect(run.stdout).toContain(id);
    expect(run.stdout).toMatch(/would redrive 1 dead letter\(s\); nothing changed \(dry run\)/);
    expect(await rowState(id)).toMatchObject({ attempts: 10, processed_at: null });
    expect((await rowState(id)).dead_lettered_at).toBeInstanceOf(Date);
  });

  it("returns the selected dead letters to pending: attempts 0, available now, last error kept with a note", async () => {
    const chosen = await insertDeadLetter({ aggregateId: "order-a" });
    const other = await insertDeadLetter({ aggregateId: "order-b" });
    const sameType = await insertDeadLetter({ eventType: "order.refunded", aggregateId: "order-c" });

    const byId = await outbox(["redrive", "--id", chosen, "--json"]);
    const byType = await outbox(["redrive", "--event-type", "order.refunded"]);

    expect(byId.code).toBe(0);
    expect(JSON.parse(byId.stdout)).toMatchObject({ dryRun: false, redriven: 1, events: [{ id: chosen }] });
    expect(await rowState(chosen)).toMatchObject({ attempts: 0, dead_lettered_at: null, available: true });
    expect((await rowState(chosen)).last_error).toMatch(
      /^redriven at \S+Z after 10 attempts; last error: SQS rejected the message/,
    );
    expect((await rowState(other)).dead_lettered_at).toBeInstanceOf(Date);
    expect(byType.stdout).toMatch(/redrove 1 dead letter/);
    expect((await rowState(sameType)).dead_lettered_at).toBeNull();
  });

  it("warns when a redriven event is older than already-published events of its aggregate", async () => {
    const dead = await insertDeadLetter({ aggregateId: "order-x" });
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('order', 'order-x', 'order.updated', '{}', now())`,
    );

    const run = await outbox(["redrive", "--id", dead]);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/later event of this group already published/);
    expect(run.stdout).toMatch(
      /warning: 1 of them are older than events of the same message group.*group\(s\): order-x/,
    );
  });

  it("--dry-run names the groups a redrive would overtake, after the purge deleted the successor", async () => {
    const dead = await insertDeadLetter({ aggregateId: "order-y" });
    // A Shipment of the same id: same group. Published a month ago and purged since.
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('shipment', 'order-y', 'shipment.sent', '{}', now() - interval '30 days')`,
    );
    const purge = await outbox(["purge"]);
    expect(purge.code).toBe(0);

    const run = await outbox(["redrive", "--id", dead, "--dry-run", "--json"]);

    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ dryRun: true, overtakenGroups: ["order-y"] });
    expect((await rowState(dead)).dead_lettered_at).toBeInstanceOf(Date);
  });

  it("gets a redriven dead letter published by `outbox relay --drain`", async () => {
    const queueUrl = await createFifoQueue(sqs, "cli-redrive");
    const id = await insertDeadLetter({ aggregateId: "order-redriven" });

    const redrive = await outbox(["redrive", "--id", id]);
    const relay = await outbox(["relay", "--drain", "--json"], {
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
    });

    expect(redrive.code).toBe(0);
    expect(relay.code).toBe(0);
    expect(JSON.parse(relay.stdout)).toMatchObject({ published: 1, failed: 0, stoppedBy: "drained" });
    const messages = await receiveAll(sqs, queueUrl, 1);
    expect(messages.map((message) => message.MessageAttributes?.outboxId?.StringValue)).toEqual([id]);
    expect((await rowState(id)).processed_at).toBeInstanceOf(Date);
  });
});

describe("outbox relay", () => {
  it("refuses a malformed queue URL, and a queue that does not exist, before relaying", async () => {
    const endpoint = inject("awsEndpoint");
    const malformed = await outbox(["relay", "--drain", "--queue-url", "orders.fifo"]);
    const missing = await outbox(["relay", "--drain", "--endpoint-url", endpoint], {
      OUTBOX_QUEUE_URL: `${endpoint}/123456789012/no-such-queue.fifo`,
    });

    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(
      /--queue-url \/ OUTBOX_QUEUE_URL must be a queue URL like https:\/\/sqs\./,
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/queue .*no-such-queue\.fifo does not exist/);
  });

  it("refuses to relay, exit 2, when the order key ran backwards (a restored sequence), and publishes nothing", async () => {
    const queueUrl = await createFifoQueue(sqs, "cli-order-key");
    const env = { OUTBOX_QUEUE_URL: queueUrl, AWS_ENDPOINT_URL: inject("awsEndpoint") };
    await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()]);
    expect((await outbox(["relay", "--drain"], env)).code).toBe(0);
    const { rows } = await db.pool.query<{ seq: string }>("select max(seq)::text as seq from outbox_events");
    await db.pool.query("select setval('outbox_events_seq_seq', 1)");
    const row = await enqueueCommitted(db.pool, anEvent({ aggregateId: "order-after-restore" }));
    try {
      const relay = await outbox(["relay", "--drain"], env);

      expect(relay.code).toBe(2);
      expect(relay.stderr).toMatch(
        /the order key ran backwards: sequence public\.outbox_events_seq_seq would hand out seq \d+ next, not above seq \d+, the highest/,
      );
      expect((await rowState(row.id)).processed_at).toBeNull();
    } finally {
      await db.pool.query("delete from outbox_events where id = $1", [row.id]);
      await db.pool.query("select setval('outbox_events_seq_seq', $1::bigint)", [rows[0]?.seq]);
    }
  });

  describe("on SIGTERM", () => {
    let fake: FakeSqs;
    beforeAll(async () => {
      fake = await startFakeSqs();
    });
    afterAll(async () => {
      await fake.close();
    });

    it("finishes and records the round in progress, leaves no row locked, and exits 0", async () => {
      const queueUrl = await createFifoQueue(sqsClient(fake.url), "cli-sigterm");
      const ids = (await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
      let publishing: () => void = () => {};
      const publishInFlight = new Promise<void>((resolve) => {
        publishing = resolve;
      });
      // Hold the relay's first publish for a while, and tell the test it is in flight: SIGTERM lands mid-round.
      fake.setFaults({
        latencyMs: (action) => {
          if (action !== "SendMessageBatch") return 0;
          publishing();
          return 1_000;
        },
      });

      const relay = startCli(["relay", "--endpoint-url", fake.url, "--log-format", "json", "--json"], {
        OUTBOX_QUEUE_URL: queueUrl,
      });
      const done = finished(relay);
      await publishInFlight;
      relay.kill("SIGTERM");
      const run = await done;

      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ published: 3, failed: 0, stoppedBy: "signal" });
      expect(run.stderr).toMatch(
        /"message":"stopping: no new rounds; the round in progress finishes and records"/,
      );
      const { rows } = await db.pool.query(
        "select count(*)::int as published from outbox_events where id = any($1::uuid[]) and processed_at is not null",
        [ids],
      );
      expect(rows[0].published).toBe(3);
      const locked = await db.pool.query("select id from outbox_events for update nowait");
      expect(locked.rowCount).toBe(3);
    });
  });
});

describe("outbox purge", () => {
  it("deletes published rows older than the retention and keeps recent and pending ones", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'old-' || g, 'order.created', '{}', now() - interval '10 days', now() - interval '9 days'
       from generate_series(1, 5) as g`,
    );
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('order', 'recent-1', 'order.created', '{}', now() - interval '1 hour')`,
    );
    await enqueueCommitted(db.pool, anEvent());

    const run = await outbox(["purge", "--retention-hours", "24", "--json"]);

    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      deletedRows: 5,
      deletedDeadLetters: 0,
      stoppedBy: "drained",
    });
    const { rows } = await db.pool.query(
      "select count(*)::int as left, count(*) filter (where processed_at is null)::int as pending from outbox_events",
    );
    expect(rows[0]).toEqual({ left: 2, pending: 1 });
  });
});

describe("outbox relay --event-bus", () => {
  it("publishes to an EventBridge bus, read back through a rule and a queue", async () => {
    const events = eventBridgeClient();
    const { busName, queueUrl } = await createBusToQueue(events, sqs, "com.example.cli", "cli-bus");
    events.destroy();
    await db.pool.query("delete from outbox_events where processed_at is null");
    const [event] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-on-the-bus" })]);

    const relay = await outbox(
      ["relay", "--drain", "--json", "--event-bus", busName, "--event-source", "com.example.cli"],
      { AWS_ENDPOINT_URL: inject("awsEndpoint"), RELAY_PUBLISH_TIMEOUT_MS: "30000" },
    );

    expect(relay.stderr).not.toMatch(/error/i);
    expect(JSON.parse(relay.stdout)).toMatchObject({ published: 1, failed: 0, stoppedBy: "drained" });
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(JSON.parse(message?.Body ?? "{}")).toMatchObject({
      source: "com.example.cli",
      detail: { outboxId: event?.id, aggregateId: "order-on-the-bus" },
    });
  });

  it("takes OUTBOX_ROUTES alone as its destination (the queue is then an optional default)", async () => {
    const queueUrl = await createFifoQueue(sqs, "cli-routes");
    await db.pool.query("delete from outbox_events where processed_at is null");
    const [event] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-routed" })]);
    const routes = [{ match: {}, destination: { kind: "sqs-fifo", queueUrl } }];

    const relay = await outbox(["relay", "--drain", "--json"], {
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
      OUTBOX_ROUTES: JSON.stringify(routes),
    });

    expect(relay.stderr).not.toMatch(/no destination/);
    expect(JSON.parse(relay.stdout)).toMatchObject({ published: 1, failed: 0, stoppedBy: "drained" });
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.MessageAttributes?.outboxId?.StringValue).toBe(event?.id);
  });

  it("refuses a queue and a bus at once, and neither, naming both settings", async () => {
    const both = await outbox(["relay", "--drain", "--event-bus", "orders"], {
      OUTBOX_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
    });
    const neither = await outbox(["relay", "--drain"]);

    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/OUTBOX_QUEUE_URL and OUTBOX_EVENT_BUS_NAME are both set/);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(
      /no destination: pass --queue-url .* or --event-bus .*, or set OUTBOX_ROUTES/,
    );
  });
});
