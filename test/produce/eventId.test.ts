import { describe, expect, it } from "vitest";
import { newEventId } from "../../functions/shared/outbox/eventId.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";

const db = useTestDatabase();
const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("event ids (UUID version 7, RFC 9562)", () => {
  it("carry the creation time in their first 48 bits, version 7 and the RFC variant", () => {
    const at = Date.UTC(2026, 11, 2, 10, 30, 0, 123);
    const id = newEventId(at);
    expect(id).toMatch(V7);
    expect(Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16)).toBe(at);
  });

  it("sort by time across milliseconds and do not repeat within one", () => {
    const earlier = Array.from({ length: 1_000 }, () => newEventId(1_796_000_000_000));
    const later = Array.from({ length: 1_000 }, () => newEventId(1_796_000_000_001));
    expect(new Set([...earlier, ...later]).size).toBe(2_000);
    for (const a of earlier) for (const b of later.slice(0, 10)) expect(a < b).toBe(true);
  });

  it("are what the write API stores: the primary key grows with time instead of landing anywhere", async () => {
    const before = Date.now();
    const [first] = await enqueueCommitted(db.pool, [anEvent()]);
    const [second] = await enqueueCommitted(db.pool, [anEvent()]);
    const after = Date.now();
    const { rows } = await db.pool.query<{ id: string }>(
      "select id::text from outbox_events where id = any($1::uuid[]) order by seq",
      [[first?.id, second?.id]],
    );
    const millis = rows.map((row) => Number.parseInt(row.id.replaceAll("-", "").slice(0, 12), 16));
    expect(rows.map((row) => row.id)).toEqual([first?.id, second?.id]);
    for (const row of rows) expect(row.id).toMatch(V7);
    expect(millis[0]).toBeGreaterThanOrEqual(before);
    expect(millis[1]).toBeGreaterThanOrEqual(millis[0] ?? Number.POSITIVE_INFINITY);
    expect(millis[1]).toBeLessThanOrEqual(after);
  });
});
