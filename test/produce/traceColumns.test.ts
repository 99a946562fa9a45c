import { describe, expect, it } from "vitest";
import { useTestDatabase } from "../support/db.ts";

const db = useTestDatabase();

/** A producer writing plain SQL (another language, a script) sets the trace columns itself: migration 0013 checks them. */
function insert(traceparent: string | null, tracestate: string | null) {
  return db.pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, traceparent, tracestate)
     values ('order', 'o-sql', 'order.created', '{}', $1, $2) returning traceparent, tracestate`,
    [traceparent, tracestate],
  );
}

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("the trace columns written by plain SQL", () => {
  it("take a W3C traceparent and tracestate, or nulls", async () => {
    expect((await insert(TRACEPARENT, "vendor=abc, other=1")).rows).toEqual([
      { traceparent: TRACEPARENT, tracestate: "vendor=abc, other=1" },
    ]);
    expect((await insert(null, null)).rows).toEqual([{ traceparent: null, tracestate: null }]);
  });

  it("refuse a malformed value with an error naming the column and the rule", async () => {
    await expect(insert("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", null)).rejects.toThrow(
      /outbox traceparent: '00-4BF9.*' is not a W3C traceparent/,
    );
    await expect(insert(`00-${"0".repeat(32)}-00f067aa0ba902b7-01`, null)).rejects.toThrow(
      /ids not all zero/,
    );
    await expect(insert(null, "vendor=abc")).rejects.toThrow(/outbox tracestate: set without a traceparent/);
    await expect(insert(TRACEPARENT, `a=${"x".repeat(600)}`)).rejects.toThrow(
      /is 602 characters, the limit is 512/,
    );
    await expect(insert(TRACEPARENT, "Vendor=abc")).rejects.toThrow(
      /outbox tracestate: 'Vendor=abc' is not a W3C/,
    );
  });

  it("are checked on update too (an operator's fix-up)", async () => {
    const { rows } = await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       values ('order', 'o-upd', 'order.created', '{}') returning id`,
    );
    await expect(
      db.pool.query("update outbox_events set traceparent = 'nonsense' where id = $1", [rows[0].id]),
    ).rejects.toThrow(/outbox traceparent/);
  });
});
