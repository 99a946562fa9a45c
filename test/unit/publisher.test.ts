import { describe, expect, it } from "vitest";
import type {
  Destination,
  LoadedRow,
  Prepared,
  PublishResult,
} from "../../functions/shared/destinations/destination.ts";
import { routingDestination } from "../../functions/shared/destinations/routing/router.ts";
import { publishRows } from "../../functions/shared/relay/publisher.ts";

/**
 * The publisher's ordering rules (relay/publisher.ts), on an in-memory destination that records each request: the
 * seam's contract, not SQS. What SQS itself does with a batch is the conformance tests' job (test/relay/).
 */
function row(id: string, aggregateId: string, seq: number, aggregateType = "order"): LoadedRow {
  return {
    id,
    seq: String(seq),
    aggregate_type: aggregateType,
    aggregate_id: aggregateId,
    event_type: "order.placed",
    attempts: 0,
    transient_failures: 0,
    created_at: new Date(0),
    payload: "{}",
    headers: {},
  };
}

interface Recorder extends Destination<string> {
  requests: string[][];
}

/** Takes `maxBatchEntries`/`maxBatchBytes`; fails the ids in `failing` (unsent), rejects bad ones at prepare. */
function recorder(options: { maxBatchEntries?: number; maxBatchBytes?: number; failing?: string[] } = {}) {
  const requests: string[][] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const destination: Recorder = {
    kind: "sqs-fifo",
    target: "memory",
    maxBatchEntries: options.maxBatchEntries ?? 10,
    maxBatchBytes: options.maxBatchBytes ?? 1_000_000,
    maxMessageBytes: 1_000_000,
    requests,
    prepare: (loaded): Prepared<string> | string =>
      loaded.id.startsWith("bad") ? "cannot be sent" : { row: loaded, message: loaded.id, size: 100 },
    send: async (batch): Promise<PublishResult[]> => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      requests.push(batch.map((entry) => entry.message));
      await Promise.resolve();
      inFlight--;
      return batch.map((entry) =>
        options.failing?.includes(entry.row.id)
          ? { row: entry.row, status: "unsent", error: "throttled" }
          : { row: entry.row, status: "published" },
      );
    },
  };
  return { destination, requests, maxInFlight: () => maxInFlight };
}

const statuses = (results: PublishResult[]) =>
  Object.fromEntries(results.map((result) => [result.row.id, result.status]));

describe("publishRows", () => {
  it("puts at most one message of a group in a request, and sends a group's messages in seq order, request after request", async () => {
    const { destination, requests } = recorder();
    const rows = [row("a1", "A", 1), row("a2", "A", 2), row("b1", "B", 3), row("a3", "A", 4)];

    const results = await publishRows(destination, rows, { concurrency: 5 });

    expect(requests).toEqual([["a1", "b1"], ["a2"], ["a3"]]);
    expect(Object.values(statuses(results))).toEqual(["published", "published", "published", "published"]);
  });

  it("groups by aggregate_id alone: two aggregate types sharing an id share a group (the FIFO MessageGroupId)", async () => {
    const { destination, requests } = recorder();

    await publishRows(destination, [row("o", "42", 1, "order"), row("s", "42", 2, "shipment")], {
      concurrency: 5,
    });

    expect(requests).toEqual([["o"], ["s"]]);
  });

  it("holds the rest of a group after one of its messages failed, and sends the other groups", async () => {
    const { destination, requests } = recorder({ failing: ["a1"] });
    const rows = [row("a1", "A", 1), row("a2", "A", 2), row("b1", "B", 3), row("b2", "B", 4)];

    const results = await publishRows(destination, rows, { concurrency: 5 });

    expect(statuses(results)).toEqual({ a1: "unsent", a2: "held", b1: "published", b2: "published" });
    expect(requests.flat()).not.toContain("a2");
  });

  it("rejects a row that cannot be prepared, permanently, without holding its group's later rows", async () => {
    const { destination } = recorder();

    const results = await publishRows(destination, [row("bad", "A", 1), row("a2", "A", 2)], {
      concurrency: 1,
    });

    expect(results).toContainEqual({
      row: expect.objectContaining({ id: "bad" }),
      status: "rejected",
      error: "cannot be sent",
      permanent: true,
    });
    expect(statuses(results).a2).toBe("published");
  });

  it("splits a wave into requests within the destination's entry and byte limits", async () => {
    const { destination, requests } = recorder({ maxBatchEntries: 3, maxBatchBytes: 250 });
    const rows = ["A", "B", "C", "D", "E"].map((group, index) => row(group, group, index));

    await publishRows(destination, rows, { concurrency: 5 });

    // 100 bytes each: the byte limit (250) cuts at two before the entry limit (3) does.
    expect(requests).toEqual([["A", "B"], ["C", "D"], ["E"]]);
  });

  it("keeps at most `concurrency` requests in flight", async () => {
    const { destination, maxInFlight } = recorder({ maxBatchEntries: 1 });
    const rows = Array.from({ length: 12 }, (_, index) => row(`r${index}`, `g${index}`, index));

    await publishRows(destination, rows, { concurrency: 3 });

    expect(maxInFlight()).toBe(3);
  });
});

describe("publishRows behind a router (destinations/routing/router.ts)", () => {
  it("never mixes destinations in one request, each packed with its own limits", async () => {
    const small = recorder({ maxBatchEntries: 2 });
    const large = recorder({ maxBatchEntries: 10 });
    const router = routingDestination([
      { match: { aggregateType: ["order"] }, destination: small.destination },
      { match: { aggregateType: ["cart"] }, destination: large.destination },
    ]);
    const rows = Array.from({ length: 10 }, (_, i) =>
      row(`r${i}`, `agg-${i}`, i + 1, i % 2 === 0 ? "order" : "cart"),
    );

    const results = await publishRows(router, rows, { concurrency: 4 });

    expect(results.every((result) => result.status === "published")).toBe(true);
    expect(small.requests).toEqual([["r0", "r2"], ["r4", "r6"], ["r8"]]);
    expect(large.requests).toEqual([["r1", "r3", "r5", "r7", "r9"]]);
  });

  it("holds a group's later events after its first failed, even those routed to another destination", async () => {
    const failing = recorder({ failing: ["g1"] });
    const healthy = recorder();
    const router = routingDestination([
      { match: { aggregateType: ["order"] }, destination: failing.destination },
      { match: { aggregateType: ["payment"] }, destination: healthy.destination },
    ]);
    const rows = [
      row("g1", "shared", 1, "order"),
      row("g2", "shared", 2, "payment"),
      row("g3", "shared", 3, "order"),
      row("other", "elsewhere", 4, "payment"),
    ];

    const results = await publishRows(router, rows, { concurrency: 4 });

    const status = new Map(results.map((result) => [result.row.id, result.status]));
    expect(Object.fromEntries(status)).toEqual({
      g1: "unsent",
      g2: "held",
      g3: "held",
      other: "published",
    });
    expect(healthy.requests).toEqual([["other"]]);
  });
});
