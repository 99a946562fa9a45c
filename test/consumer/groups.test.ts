import { describe, expect, it } from "vitest";
import { processByGroup } from "../../functions/shared/consumer/processByGroup.ts";
import type { SqsRecord } from "../../functions/shared/consumer/sqsEvent.ts";
import { sqsRecord as record } from "../unit/records.ts";

/** A process() whose calls stay pending until the test settles them, so concurrency is observed, not timed. */
function controlled() {
  const calls: { id: string; settle(ok: boolean): void }[] = [];
  return {
    calls,
    started: () => calls.map((call) => call.id),
    process: (r: SqsRecord) =>
      new Promise<boolean>((resolve) => {
        calls.push({ id: r.messageId, settle: resolve });
      }),
    async settle(id: string, ok: boolean) {
      calls.find((call) => call.id === id)?.settle(ok);
      await flush();
    },
  };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("processByGroup: FIFO partial failures", () => {
  it("keeps at most `concurrency` groups in flight and each group in order", async () => {
    const p = controlled();
    const records = [
      record("a1", "a"),
      record("b1", "b"),
      record("a2", "a"),
      record("c1", "c"),
      record("d1", "d"),
    ];
    const done = processByGroup(records, { concurrency: 2, process: p.process });
    await flush();
    expect(p.started()).toEqual(["a1", "b1"]);
    await p.settle("b1", true);
    expect(p.started()).toEqual(["a1", "b1", "c1"]);
    await p.settle("a1", true);
    expect(p.started()).toEqual(["a1", "b1", "c1", "a2"]);
    for (const id of ["c1", "a2"]) await p.settle(id, true);
    await p.settle("d1", true);
    expect(await done).toEqual([]);
  });

  it("fails a group's later records unprocessed once one fails, and lets the other groups go on", async () => {
    const p = controlled();
    const skipped: string[] = [];
    const records = [
      record("a1", "a"),
      record("b1", "b"),
      record("a2", "a"),
      record("a3", "a"),
      record("b2", "b"),
    ];
    const done = processByGroup(records, {
      concurrency: 10,
      process: p.process,
      onSkipped: (r) => void skipped.push(r.messageId),
    });
    await flush();
    await p.settle("a1", false);
    await p.settle("b1", true);
    await p.settle("b2", true);
    expect(await done).toEqual([records[0], records[2], records[3]]);
    expect(p.started()).toEqual(["a1", "b1", "b2"]);
    expect(skipped).toEqual(["a2", "a3"]);
  });

  it("treats a record without a group (standard queue) as a group of its own", async () => {
    const failed = await processByGroup([record("x", undefined), record("y", undefined)], {
      concurrency: 1,
      process: async (r) => r.messageId !== "x",
    });
    expect(failed.map((r) => r.messageId)).toEqual(["x"]);
  });
});
