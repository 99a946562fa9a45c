import { describe, expect, it } from "vitest";
import type { SqsRecord } from "../../functions/shared/consumer/index.ts";
import { processByGroup } from "../../functions/shared/consumer/processByGroup.ts";
import { sqsRecord } from "./records.ts";

/**
 * A process() whose records stay in flight until the test settles them. `started(id)` resolves when the record
 * has been handed to process(), so the test waits on the code's own progress, never on a timer; the in-flight
 * counts are kept as records start and settle, so overlap is measured rather than guessed.
 */
function controlled() {
  const settlers = new Map<string, (ok: boolean) => void>();
  const onStart = new Map<string, () => void>();
  const starts: string[] = [];
  const inFlight = new Map<string, number>();
  let inFlightTotal = 0;
  let maxTotal = 0;
  let maxInOneGroup = 0;
  const groupOf = (record: SqsRecord) => record.attributes.MessageGroupId ?? record.messageId;
  return {
    starts,
    max: () => ({ total: maxTotal, inOneGroup: maxInOneGroup }),
    process(record: SqsRecord): Promise<boolean> {
      const group = groupOf(record);
      const inGroup = (inFlight.get(group) ?? 0) + 1;
      inFlight.set(group, inGroup);
      inFlightTotal++;
      maxInOneGroup = Math.max(maxInOneGroup, inGroup);
      maxTotal = Math.max(maxTotal, inFlightTotal);
      starts.push(record.messageId);
      onStart.get(record.messageId)?.();
      return new Promise<boolean>((resolve) => {
        settlers.set(record.messageId, (ok) => {
          inFlight.set(group, (inFlight.get(group) ?? 1) - 1);
          inFlightTotal--;
          resolve(ok);
        });
      });
    },
    started(id: string): Promise<void> {
      if (starts.includes(id)) return Promise.resolve();
      return new Promise((resolve) => onStart.set(id, resolve));
    },
    settle(id: string, ok: boolean): void {
      const settle = settlers.get(id);
      if (settle === undefined) throw new Error(`${id} has not started`);
      settle(ok);
    },
  };
}

const ids = (records: SqsRecord[]) => records.map((record) => record.messageId);

describe("processByGroup", () => {
  it("runs one group's records one at a time in delivery order, and different groups side by side", async () => {
    const p = controlled();
    const records = [
      sqsRecord("a1", "a"),
      sqsRecord("b1", "b"),
      sqsRecord("a2", "a"),
      sqsRecord("b2", "b"),
      sqsRecord("a3", "a"),
    ];
    const done = processByGroup(records, { concurrency: 10, process: (r) => p.process(r) });

    await Promise.all([p.started("a1"), p.started("b1")]);
    p.settle("a1", true);
    await p.started("a2");
    p.settle("a2", true);
    await p.started("a3");
    p.settle("b1", true);
    await p.started("b2");
    p.settle("a3", true);
    p.settle("b2", true);

    expect(await done).toEqual([]);
    expect(p.starts.filter((id) => id.startsWith("a"))).toEqual(["a1", "a2", "a3"]);
    expect(p.starts.filter((id) => id.startsWith("b"))).toEqual(["b1", "b2"]);
    expect(p.max()).toEqual({ total: 2, inOneGroup: 1 });
  });

  it("with concurrency 1, finishes a group before starting the next", async () => {
    const p = controlled();
    const records = [sqsRecord("a1", "a"), sqsRecord("b1", "b"), sqsRecord("a2", "a")];
    const done = processByGroup(records, { concurrency: 1, process: (r) => p.process(r) });
    await p.started("a1");
    p.settle("a1", true);
    await p.started("a2");
    p.settle("a2", true);
    await p.started("b1");
    p.settle("b1", true);
    expect(await done).toEqual([]);
    expect(p.starts).toEqual(["a1", "a2", "b1"]);
    expect(p.max().total).toBe(1);
  });

  it("fails the rest of a failed record's group unprocessed, and only that group", async () => {
    const p = controlled();
    const skipped: [string, string][] = [];
    const records = [
      sqsRecord("a1", "a"),
      sqsRecord("b1", "b"),
      sqsRecord("a2", "a"),
      sqsRecord("b2", "b"),
      sqsRecord("a3", "a"),
    ];
    const done = processByGroup(records, {
      concurrency: 10,
      process: (r) => p.process(r),
      onSkipped: (record, groupId) => void skipped.push([record.messageId, groupId]),
    });

    await Promise.all([p.started("a1"), p.started("b1")]);
    p.settle("a1", false);
    p.settle("b1", true);
    await p.started("b2");
    p.settle("b2", true);

    expect(ids(await done)).toEqual(["a1", "a2", "a3"]);
    expect(skipped).toEqual([
      ["a2", "a"],
      ["a3", "a"],
    ]);
    expect(p.starts).toEqual(["a1", "b1", "b2"]);
  });

  it("takes a process() that throws for a failure, and returns the failed in delivery order, not finishing order", async () => {
    const records = [sqsRecord("a1", "a"), sqsRecord("b1", "b"), sqsRecord("a2", "a"), sqsRecord("c1", "c")];
    const p = controlled();
    const done = processByGroup(records, {
      concurrency: 10,
      process: (r) => (r.messageId === "b1" ? Promise.reject(new Error("boom")) : p.process(r)),
    });
    await Promise.all([p.started("a1"), p.started("c1")]);
    p.settle("c1", true);
    p.settle("a1", false);
    expect(ids(await done)).toEqual(["a1", "b1", "a2"]);
  });

  it("makes each record without a group (a standard queue) a group of its own", async () => {
    const p = controlled();
    const skipped: string[] = [];
    const records = [sqsRecord("x"), sqsRecord("y"), sqsRecord("z")];
    const done = processByGroup(records, {
      concurrency: 10,
      process: (r) => p.process(r),
      onSkipped: (record) => void skipped.push(record.messageId),
    });
    await Promise.all([p.started("x"), p.started("y"), p.started("z")]);
    p.settle("x", false);
    p.settle("y", true);
    p.settle("z", true);
    expect(ids(await done)).toEqual(["x"]);
    expect(skipped).toEqual([]);
    expect(p.max().total).toBe(3);
  });

  it("does nothing for an empty batch", async () => {
    let calls = 0;
    const failed = await processByGroup([], {
      concurrency: 4,
      process: async () => {
        calls++;
        return true;
      },
    });
    expect(failed).toEqual([]);
    expect(calls).toBe(0);
  });
});
