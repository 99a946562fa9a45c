import { Metrics } from "@aws-lambda-powertools/metrics";
import { beforeAll, describe, expect, it, vi } from "vitest";
import {
  createInboxHandler,
  type InboxEvent,
  inboxRoute,
  type StandardSchemaV1,
} from "../../functions/shared/consumer/index.ts";
import {
  CONSUMER_SCHEMA,
  createConsumerTables,
  effects,
  recorder,
  relayRecord,
} from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";

const db = useTestDatabase();

beforeAll(async () => {
  await createConsumerTables(db.pool);
});

interface Order {
  orderId: string;
  total: number;
}

/** A Standard Schema validator as zod, valibot or arktype expose one (`~standard`), written by hand. */
const orderSchema: StandardSchemaV1<unknown, Order> = {
  "~standard": {
    version: 1,
    vendor: "handwritten",
    validate(value) {
      const v = value as Partial<Order> | null;
      if (typeof v?.orderId !== "string")
        return { issues: [{ message: "expected a string", path: ["orderId"] }] };
      if (typeof v.total !== "number")
        return { issues: [{ message: "expected a number", path: [{ key: "total" }] }] };
      return { value: { orderId: v.orderId, total: v.total } };
    },
  },
};

const insertEffect = `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`;

describe("parse hooks (finding 6)", () => {
  it("validates the payload with a Standard Schema: a bad one fails its record and its group's rest, naming the path", async () => {
    const log = recorder();
    const seen: Order[] = [];
    const handler = createInboxHandler(
      async (event, { client }) => {
        seen.push(event.payload);
        await client.query(insertEffect, [event.id, event.aggregateId, `total:${event.payload.total}`]);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, parse: orderSchema, ...log },
    );
    const good = relayRecord({
      aggregateId: "parse-a",
      seq: 1,
      payload: { orderId: "a", total: 5, extra: 1 },
    });
    const bad = relayRecord({ aggregateId: "parse-b", seq: 2, payload: { orderId: "b", total: "5" } });
    const afterBad = relayRecord({ aggregateId: "parse-b", seq: 3, payload: { orderId: "b", total: 6 } });
    const badId = bad.messageAttributes.outboxId?.stringValue;

    const result = await handler({ Records: [good, bad, afterBad] });

    expect(result.batchItemFailures).toEqual([
      { itemIdentifier: bad.messageId },
      { itemIdentifier: afterBad.messageId },
    ]);
    // The schema's output, not the raw payload (the extra field is gone).
    expect(seen).toEqual([{ orderId: "a", total: 5 }]);
    expect(await effects(db.pool)).not.toContain(badId);
    expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(
      /ValidationError: payload: does not match the handwritten schema: total: expected a number/,
    );
  });

  it("runs a route's own parse, a plain function, and fails the record when it throws", async () => {
    const log = recorder();
    const placed: number[] = [];
    const handler = createInboxHandler(
      {
        "order.placed": inboxRoute({
          parse: (payload: unknown) => {
            const { total } = payload as { total: unknown };
            if (typeof total !== "number") throw new Error("total must be a number");
            return { total };
          },
          handle: (event) => void placed.push(event.payload.total),
        }),
        "order.paid": (_event: InboxEvent<{ paid: true }>) => {},
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );
    const ok = relayRecord({ aggregateId: "route-parse-a", seq: 1, payload: { total: 7 } });
    const refused = relayRecord({ aggregateId: "route-parse-b", seq: 2, payload: { total: null } });

    const result = await handler({ Records: [ok, refused] });

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: refused.messageId }]);
    expect(placed).toEqual([7]);
    expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(
      /payload: was refused by the parse hook: total must be a number/,
    );
  });

  it("refuses a parse option that is neither a schema nor a function, naming it", () => {
    expect(() => createInboxHandler(() => {}, { pool: db.pool, parse: { validate() {} } as never })).toThrow(
      /parse must be a Standard Schema \(~standard\) or a function/,
    );
  });
});

describe("metrics: a Powertools Metrics instance", () => {
  it("gets one EMF line per invocation with every outcome's count, zeros included", async () => {
    let out = "";
    const spy = vi.spyOn(process.stdout, "write").mockImplementation(((chunk: unknown) => {
      out += String(chunk);
      return true;
    }) as typeof process.stdout.write);
    try {
      const metrics = new Metrics({ namespace: "OrdersConsumer", serviceName: "orders-consumer" });
      const handler = createInboxHandler(
        async (event, { client }) => {
          if (event.aggregateId === "metrics-fail") throw new Error("boom");
          await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
        },
        { pool: db.pool, schema: CONSUMER_SCHEMA, metrics },
      );
      const ok = relayRecord({ aggregateId: "metrics-ok", seq: 1 });
      const failing = relayRecord({ aggregateId: "metrics-fail", seq: 2 });
      const skipped = relayRecord({ aggregateId: "metrics-fail", seq: 3 });

      await handler({ Records: [ok, failing, skipped, ok] });
    } finally {
      spy.mockRestore();
    }
    const lines = out
      .split("\n")
      .filter((line) => line.includes('"_aws"'))
      .map((line) => JSON.parse(line));
    expect(lines).toHaveLength(1);
    const [line] = lines;
    expect(line._aws.CloudWatchMetrics[0].Namespace).toBe("OrdersConsumer");
    expect(line._aws.CloudWatchMetrics[0].Dimensions).toEqual([["service"]]);
    expect(line.service).toBe("orders-consumer");
    expect({
      processed: line.InboxRecordsProcessed,
      duplicate: line.InboxRecordsDuplicate,
      stale: line.InboxRecordsStale,
      ignored: line.InboxRecordsIgnored,
      failed: line.InboxRecordsFailed,
      skipped: line.InboxRecordsSkipped,
    }).toEqual({ processed: 1, duplicate: 1, stale: 0, ignored: 0, failed: 1, skipped: 1 });
  });

  it("keeps the outcomes when the metrics backend throws", async () => {
    const log = recorder();
    const handler = createInboxHandler(() => {}, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      logger: log.logger,
      metrics: {
        addMetric: () => {},
        publishStoredMetrics: () => {
          throw new Error("stdout closed");
        },
      },
    });
    const record = relayRecord({ aggregateId: "metrics-throws", seq: 1 });

    await expect(handler({ Records: [record] })).resolves.toEqual({ batchItemFailures: [] });
    expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(/stdout closed/);
  });
});
