import { describe, expect, it } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { ConfigError, ValidationError } from "../../functions/shared/outbox/errors.ts";
import { jsonbBodySize } from "../../functions/shared/outbox/jsonbSize.ts";
import { compactJsonbText } from "../../functions/shared/outbox/jsonbText.ts";
import { enqueue, type OutboxEvent } from "../../functions/shared/produce/enqueue.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";

const db = useTestDatabase();

async function countRows(table = "public.outbox_events"): Promise<number> {
  const { rows } = await db.pool.query(`select count(*)::int as n from ${table}`);
  return rows[0].n;
}

describe("enqueue in the caller's transaction", () => {
  it("leaves exactly the enqueued rows after a commit", async () => {
    const before = await countRows();
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      const event = anEvent({
        headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
      });
      const result = await enqueue(client, event);
      await client.query("commit");

      const { rows } = await db.pool.query("select * from outbox_events where id = $1", [result.id]);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        seq: String(result.seq),
        aggregate_type: event.aggregateType,
        aggregate_id: event.aggregateId,
        event_type: event.eventType,
        payload: event.payload,
        headers: event.headers,
        attempts: 0,
        processed_at: null,
        dead_lettered_at: null,
      });
      expect(await countRows()).toBe(before + 1);
    } finally {
      client.release();
    }
  });

  it("leaves no row after a rollback", async () => {
    const before = await countRows();
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      const [first] = await enqueue(client, [anEvent(), anEvent()]);
      await client.query("rollback");

      const { rows } = await db.pool.query("select 1 from outbox_events where id = $1", [first?.id]);
      expect(rows).toHaveLength(0);
      expect(await countRows()).toBe(before);
    } finally {
      client.release();
    }
  });

  it("assigns increasing seq in array order within one statement", async () => {
    const events = Array.from({ length: 50 }, (_, i) =>
      anEvent({ aggregateId: "order-seq", payload: { i } }),
    );

    const result = await enqueueCommitted(db.pool, events);

    const seqs = result.map((row) => row.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => (a < b ? -1 : 1)));
    const { rows } = await db.pool.query(
      "select payload->>'i' as i from outbox_events where id = any($1::uuid[]) order by seq",
      [result.map((row) => row.id)],
    );
    expect(rows.map((row) => Number(row.i))).toEqual(events.map((_, i) => i));
  });

  it("honours availableAt for delayed events", async () => {
    const later = new Date(Date.now() + 3_600_000);
    const { id } = await enqueueCommitted(db.pool, anEvent({ availableAt: later }));
    const { rows } = await db.pool.query("select available_at from outbox_events where id = $1", [id]);
    expect(rows[0].available_at.getTime()).toBe(later.getTime());
  });

  it("returns an empty list for an empty batch without touching the database", async () => {
    expect(
      await enqueue(
        { query: () => Promise.reject(new Error("no query expected")), getTransactionStatus: () => "T" },
        [],
      ),
    ).toEqual([]);
  });
});

describe("enqueue validation", () => {
  const kib = 1024;
  const accepted: [string, Partial<OutboxEvent<unknown>>][] = [
    ["a 1-character aggregateId", { aggregateId: "x" }],
    ["a 128-character aggregateId", { aggregateId: "a".repeat(128) }],
    ["every punctuation character in aggregateId", { aggregateId: "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" }],
    ["a 256-character eventType", { eventType: "e".repeat(256) }],
    ["4 headers", { headers: { a: "1", b: "2", "d.e": "4", f_g: "5" } }],
    ["a payload that is just a string", { payload: "plain" }],
    ["a null payload", { payload: null }],
    ["unicode text in the payload", { payload: { name: "Zoë 🚀 日本" } }],
  ];
  it.each(accepted)("accepts %s", async (_, overrides) => {
    const { id } = await enqueueCommitted(db.pool, anEvent(overrides));
    expect(await db.pool.query("select 1 from outbox_events where id = $1", [id])).toHaveProperty(
      "rowCount",
      1,
    );
  });

  it("accepts a message of exactly the configured maximum and rejects one byte more", async () => {
    const base = anEvent({ aggregateId: "size-edge", payload: "" });
    const overhead = await sizeOf(base);
    const exact = { ...base, payload: "x".repeat(2000 - overhead - 2) }; // 2: the JSON quotes
    await expect(enqueueCommitted(db.pool, exact, { maxMessageBytes: 2000 })).resolves.toHaveProperty("id");
    await expect(
      enqueueCommitted(db.pool, { ...base, payload: `${exact.payload}x` }, { maxMessageBytes: 2000 }),
    ).rejects.toThrow(
      /event\.payload: message would be 2001 bytes \(payload plus attributes\), over the limit of 2000/,
    );
  });

  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  const rejected: [string, unknown, RegExp][] = [
    ["an empty aggregateType", { aggregateType: "" }, /event\.aggregateType: must not be empty/],
    [
      "a 257-character eventType",
      { eventType: "e".repeat(257) },
      /event\.eventType: is 257 characters, the limit is 256/,
    ],
    ["an empty aggregateId", { aggregateId: "" }, /event\.aggregateId: is 0 characters; .*1-128/],
    [
      "a 129-character aggregateId",
      { aggregateId: "a".repeat(129) },
      /event\.aggregateId: is 129 characters/,
    ],
    [
      "a space in aggregateId",
      { aggregateId: "order 1" },
      /event\.aggregateId: contains " "; .*letters, digits/,
    ],
    ["a non-ASCII aggregateId", { aggregateId: "café" }, /event\.aggregateId: contains "é"/],
    ["a numeric aggregateId", { aggregateId: 42 }, /event\.aggregateId: must be a string, got number/],
    ["a cyclic payload", { payload: cycle }, /event\.payload: is not JSON-serializable: .*circular/i],
    ["a BigInt payload", { payload: { amount: 10n } }, /event\.payload: is not JSON-serializable: .*BigInt/],
    ["an undefined payload", { payload: undefined }, /event\.payload: is not JSON-serializable: undefined/],
    ["a function payload", { payload: () => 1 }, /event\.payload: is not JSON-serializable: function/],
    ["a NaN in the payload", { payload: { total: Number.NaN } }, /event\.payload key "total": is NaN/],
    ["a NUL character in the payload", { payload: { s: "a\u0000b" } }, /NUL character/],
    ["a lone surrogate in the payload", { payload: { s: "\uD800" } }, /lone UTF-16 surrogate/],
    [
      "U+FFFF in the payload",
      { payload: { s: "\uFFFF" } },
      /event\.payload: contains U\+ffff, a character SQS refuses/,
    ],
    [
      "a numeric header",
      { headers: { retries: 3 } },
      /event\.headers\.retries: must be a string, got number/,
    ],
    ["an empty header", { headers: { tenant: "" } }, /event\.headers\.tenant: must not be empty/],
    [
      "a header named like a relay attribute",
      { headers: { eventType: "x" } },
      /event\.headers\.eventType: is reserved/,
    ],
    [
      "a header with an AWS. prefix",
      { headers: { "AWS.trace": "x" } },
      /not a valid SQS message attribute name/,
    ],
    [
      "a header with a space in its name",
      { headers: { "trace id": "x" } },
      /not a valid SQS message attribute name/,
    ],
    [
      "5 headers",
      { headers: { a: "1", b: "2", c: "3", d: "4", e: "5" } },
      /has 5 entries, the limit is 4 \(SQS allows 10 message attributes and the relay uses 6\)/,
    ],
    [
      "headers that are an array",
      { headers: ["a"] },
      /event\.headers: must be an object of string values, got array/,
    ],
    ["an invalid availableAt", { availableAt: new Date("nope") }, /event\.availableAt: must be a valid Date/],
    ["a payload over 1 MiB", { payload: "x".repeat(1024 * kib) }, /over the limit of 1048576/],
  ];
  it.each(rejected)("rejects %s, naming the field, and writes nothing", async (_, overrides, message) => {
    const before = await countRows();
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      const attempt = enqueue(client, { ...anEvent(), ...(overrides as object) } as OutboxEvent<unknown>);
      await expect(attempt).rejects.toBeInstanceOf(ValidationError);
      await expect(attempt).rejects.toThrow(message);
      // Validation happens before any SQL, so the caller's transaction is still usable.
      await expect(client.query("select 1")).resolves.toBeDefined();
      await client.query("commit");
    } finally {
      client.release();
    }
    expect(await countRows()).toBe(before);
  });

  it("rejects a whole batch when one event is invalid, naming its index", async () => {
    const before = await countRows();
    await expect(enqueueCommitted(db.pool, [anEvent(), anEvent({ aggregateId: "bad id" })])).rejects.toThrow(
      /^events\[1\]\.aggregateId: contains " "/,
    );
    expect(await countRows()).toBe(before);
  });
});

describe("configurable table", () => {
  it("writes to a table whose name needs quoting", async () => {
    const location = { schema: "Tenant A", table: "Order-Events" };
    await migrate(db.pool, location);

    const { id } = await enqueueCommitted(db.pool, anEvent(), location);

    const { rows } = await db.pool.query('select id from "Tenant A"."Order-Events"');
    expect(rows.map((row) => row.id)).toEqual([id]);
  });

  it.each([
    ['outbox_events"; drop table outbox_events; --'],
    ["outbox_events.other"],
    ["a\u0000b"],
    [""],
    ["x".repeat(41)],
  ])("rejects the identifier %j before any SQL runs", async (table) => {
    const noSql = {
      query: () => Promise.reject(new Error("SQL must not run")),
      getTransactionStatus: () => "T",
    };
    await expect(enqueue(noSql, anEvent(), { table })).rejects.toBeInstanceOf(ConfigError);
    await expect(enqueue(noSql, anEvent(), { schema: table })).rejects.toThrow(
      /^schema: .* is not an accepted identifier/,
    );
    expect(await countRows()).toBeGreaterThan(0);
  });
});

describe("a schema-qualified table name", () => {
  it("is refused with where the schema goes, before any SQL runs", async () => {
    const noSql = {
      query: () => Promise.reject(new Error("SQL must not run")),
      getTransactionStatus: () => "T",
    };
    const error = await enqueue(noSql, anEvent(), { table: "public.outbox_events" }).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(
      'table: "public.outbox_events" names a schema: pass it on its own, the schema option ' +
        '({ schema: "public", table: "outbox_events" }; OUTBOX_SCHEMA for the Lambdas, --schema for the CLI)',
    );
  });
});

/** Size of a message with an empty-string payload, to build exact-limit edge cases. */
async function sizeOf(event: OutboxEvent<unknown>): Promise<number> {
  const error = await enqueueCommitted(db.pool, event, { maxMessageBytes: 1 }).catch(
    (caught: Error) => caught,
  );
  const match = /would be (\d+) bytes/.exec(String((error as Error).message));
  return Number(match?.[1]) - 2; // minus the two quotes of ""
}

describe("enqueue measures the message the relay will send", () => {
  it("rejects, before writing, a payload whose numbers Postgres prints far longer than JSON does", async () => {
    // ~140 KB as JSON; jsonb prints each 1e-300 as 0.000…001, 302 characters: ~6 MB as sent.
    const payload = { values: Array.from({ length: 20_000 }, () => 1e-300) };
    const before = await countRows();

    const failed = await enqueueCommitted(db.pool, anEvent({ payload })).catch((error: unknown) => error);

    expect(JSON.stringify(payload).length).toBeLessThan(150_000);
    expect(failed).toBeInstanceOf(ValidationError);
    expect((failed as ValidationError).field).toBe("event.payload");
    expect(String((failed as Error).message)).toMatch(
      /message would be \d{7} bytes .*over the limit of 1048576, .*; Postgres prints its numbers in full/,
    );
    expect(await countRows()).toBe(before);
  });

  it("computes exactly the size of the body the relay sends, for numbers of every form", async () => {
    const payload = {
      tiny: [1e-7, -1.2345e-7, 5e-324, 1e-300],
      huge: [1e21, -1.5e21, 1.7976931348623157e308, 1.2345e25],
      plain: [0, -0, 123.456, -0.000001, 999999999999999900000],
      text: "1e-300 stays a string",
    };
    const { id } = await enqueueCommitted(db.pool, anEvent({ payload }));
    const { rows } = await db.pool.query("select payload::text as text from outbox_events where id = $1", [
      id,
    ]);

    expect(jsonbBodySize(JSON.stringify(payload))).toBe(Buffer.byteLength(compactJsonbText(rows[0].text)));
  });
});
