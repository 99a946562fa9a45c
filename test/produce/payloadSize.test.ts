import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { jsonbBodySize } from "../../functions/shared/outbox/jsonbSize.ts";
import { compactJsonbText } from "../../functions/shared/outbox/jsonbText.ts";
import { serializePayload } from "../../functions/shared/outbox/message.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../functions/shared/outbox/payloadPointer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";

/**
 * The write API at the largest payload it promises (64 MiB with the claim check, docs/large-payloads.md), in
 * every shape: one string, many strings, deep nesting. Its size check is one pass with constant stack
 * (outbox/jsonbSize.ts); a regex that matched strings whole overflowed the stack on one string of ~8 MiB.
 */
const db = useTestDatabase();

/** `bytes` of hex text (md5 chains): digits followed by `e` all along, which sends the size check to its scan. */
function hexText(bytes: number): string {
  const chunk = Array.from({ length: 2048 }, (_, i) =>
    createHash("md5").update(String(i)).digest("hex"),
  ).join("");
  return chunk.repeat(Math.ceil(bytes / chunk.length)).slice(0, bytes);
}

async function storedBodyBytes(id: string): Promise<number> {
  const { rows } = await db.pool.query<{ text: string }>(
    "select payload::text as text from outbox_events where id = $1",
    [id],
  );
  return Buffer.byteLength(compactJsonbText(rows[0]?.text ?? ""));
}

describe("enqueue at the claim check's maximum payload", () => {
  const options = { maxPayloadBytes: MAX_PAYLOAD_BYTES_LIMIT };

  it("takes one string of 64 MiB: exactly the largest payload, and refuses one byte more by name", async () => {
    await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = $1`, [
      MAX_PAYLOAD_BYTES_LIMIT,
    ]);
    // {"blob":"…"}: 11 bytes around the string.
    const blob = hexText(MAX_PAYLOAD_BYTES_LIMIT - 11);
    const payload = { blob };
    expect(jsonbBodySize(JSON.stringify(payload))).toBe(MAX_PAYLOAD_BYTES_LIMIT);

    const { id } = await enqueueCommitted(db.pool, anEvent({ payload }), options);

    expect(await storedBodyBytes(id)).toBe(MAX_PAYLOAD_BYTES_LIMIT);
    await expect(
      enqueueCommitted(db.pool, anEvent({ payload: { blob: `${blob}0` } }), options),
    ).rejects.toThrow(/event\.payload: is 67108865 bytes of JSON, over the claim check's limit of 67108864/);
  }, 120_000);

  it("takes 64 MiB of many strings between numbers with exponents, sized as Postgres prints them", async () => {
    await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = $1`, [
      MAX_PAYLOAD_BYTES_LIMIT,
    ]);
    // 1,000 strings of 64 KiB, each followed by a number jsonb prints longer (1e-7 → 0.0000001).
    const text = hexText(65_536);
    const payload = Array.from({ length: 1_000 }, (_, i) => ({ s: text, n: (i + 1) * 1e-7 }));
    const json = JSON.stringify(payload);
    expect(json.length).toBeGreaterThan(64 * 1_000 * 1_024);

    const { id } = await enqueueCommitted(db.pool, anEvent({ payload }), options);

    expect(jsonbBodySize(json)).toBeGreaterThan(Buffer.byteLength(json));
    expect(await storedBodyBytes(id)).toBe(jsonbBodySize(json));
  }, 120_000);

  it("sizes quotes and backslashes inside strings as text, not as string boundaries", () => {
    const payload = { a: 'say "1e5" \\', b: '\\"', c: ["\\\\", 1e21, '"2e-7"'], d: -1.5e-7 };
    const json = JSON.stringify(payload);
    // Only 1e21 and -1.5e-7 are numbers: 1000000000000000000000 (+17) and -0.00000015 (+4).
    expect(jsonbBodySize(json)).toBe(Buffer.byteLength(json) + 17 + 4);
  });
});

describe("enqueue of deeply nested payloads", () => {
  /** `depth` arrays, one inside the other, around a 0. */
  const nested = (depth: number): unknown => {
    let value: unknown = 0;
    for (let i = 0; i < depth; i++) value = [value];
    return value;
  };

  it("takes nesting deeper than JavaScript's own JSON.stringify can go, as deep as jsonb takes", async () => {
    // Native JSON.stringify overflowed at ~2,000-5,000 levels; Postgres (max_stack_depth 2 MB) parses 10,000.
    const payload = nested(10_000);
    expect(() => JSON.stringify(payload)).toThrow(RangeError);

    const { id } = await enqueueCommitted(db.pool, anEvent({ payload }));

    const { rows } = await db.pool.query(
      "select jsonb_array_length(payload) as n from outbox_events where id = $1",
      [id],
    );
    expect(rows[0].n).toBe(1);
    expect(await storedBodyBytes(id)).toBe(20_001);
  });

  it("writes what native JSON.stringify writes, and refuses what it refuses, at any depth", () => {
    const deep = (inner: unknown) => {
      let value: unknown = inner;
      for (let i = 0; i < 6_000; i++) value = { k: [value] };
      return value;
    };
    const leaf = {
      date: new Date(0),
      boxed: [Object(1), Object("s"), Object(true)],
      skipped: { u: undefined, f: () => 1, s: Symbol("x") },
      nulls: [undefined, () => 1, Symbol("y")],
      custom: { toJSON: (key: string) => `key ${key}` },
      'quote"key': "\u2028",
    };
    const text = serializePayload("payload", deep(leaf));
    // The same text natively, where the stack allows: compare the innermost 6 levels' worth.
    expect(text.endsWith(`${JSON.stringify(leaf)}${"]}".repeat(6_000)}`)).toBe(true);
    expect(text.startsWith('{"k":[{"k":[')).toBe(true);
    expect(() => serializePayload("payload", deep({ n: Number.NaN }))).toThrow(
      /payload key "n": is NaN, which JSON cannot represent/,
    );
    expect(() => serializePayload("payload", deep({ s: "a\u0000" }))).toThrow(/contains a NUL character/);
    expect(() => serializePayload("payload", deep({ big: 1n }))).toThrow(/not JSON-serializable: .*BigInt/);
    const cycle: { self?: unknown } = {};
    cycle.self = deep(cycle);
    expect(() => serializePayload("payload", cycle)).toThrow(/not JSON-serializable: .*circular/);
  });
});
