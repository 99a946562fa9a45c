import { beforeEach, describe, expect, it } from "vitest";
import { freePort } from "../../local/backends/freePort.ts";
import { cliOf } from "../support/cli.ts";
import { createEmptyDatabase, useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";

/** The `outbox` CLI: arguments, connection errors, timeouts, status and dead-letters (test/support/cli.ts runs it). */
const db = useTestDatabase();
const { outbox, insertDeadLetter } = cliOf(db);

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
