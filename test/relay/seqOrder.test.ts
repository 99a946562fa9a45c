import { describe, expect, it } from "vitest";
import { runRelay } from "../../functions/shared/relay/engine.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const aws = useFakeSqs();

describe("relay: a round loads its claim in outbox order, by number", () => {
  it("spends the byte budget on seq 9 before seq 11, though '11' sorts first as text", async () => {
    const queue = await createFifoQueue(aws.sqs, "seq-order");
    // The next two rows get seq 9 and 11: each insert draws twice from the identity's sequence (its default,
    // then 0005's trigger).
    await db.pool.query("select setval(pg_get_serial_sequence('outbox_events', 'seq'), 7)");
    const payload = { blob: "b".repeat(3_000) };
    // seq 9 for the aggregate the claim's round robin visits second, seq 11 for the one it visits first.
    const [nine] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-b", payload })]);
    const [eleven] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-a", payload })]);
    const { rows } = await db.pool.query<{ id: string; seq: string }>(
      "select id, seq::text as seq from outbox_events order by outbox_events.seq",
    );
    expect(rows).toEqual([
      { id: nine?.id, seq: "9" },
      { id: eleven?.id, seq: "11" },
    ]);
    const published: string[][] = [];

    // ~3 KB each: one fits in 4,000 bytes, so each round publishes the first row of the claim in seq order.
    await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl: queue }),
        deadline: Date.now() + 60_000,
        onRound: (report) => {
          if (report.published > 0) published.push(aws.fake.deliveries().map((d) => d.dedupId ?? ""));
        },
      },
      testRelayOptions(queue, { batchMaxBytes: 4_000 }),
    );

    expect(published[0]).toEqual([nine?.id]);
    expect(aws.fake.deliveries().map((delivery) => delivery.dedupId)).toEqual([nine?.id, eleven?.id]);
  });
});
