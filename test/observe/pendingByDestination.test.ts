import { Metrics } from "@aws-lambda-powertools/metrics";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { routeTableFromEnv } from "../../functions/shared/destinations/routing/table.ts";
import { recordOutboxSnapshot } from "../../functions/shared/observe/metrics.ts";
import { readOutboxSnapshot } from "../../functions/shared/observe/snapshot.ts";
import {
  pendingByRoute,
  pendingByRouteStatement,
} from "../../functions/shared/observe/sql/pendingByRoute.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { useTestDatabase } from "../support/db.ts";
import { type PlanNode, planNodes } from "../support/explainClaim.ts";

const db = useTestDatabase();
const table = "routed_events";
const names = outboxNames({ table });

const ORDERS = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo";
const ROUTES = JSON.stringify([
  { match: { aggregateType: "order" }, destination: { kind: "sqs-fifo", queueUrl: ORDERS } },
  { match: { eventType: "payment.*" }, destination: { kind: "kinesis", streamName: "payments" } },
]);

/** `[aggregate_type, event_type, age in seconds, state]`. */
async function insert(rows: [string, string, number, "pending" | "dead" | "published"][]) {
  for (const [aggregateType, eventType, age, state] of rows) {
    await db.pool.query(
      `insert into ${names.qualified} (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at,
                                       dead_lettered_at)
       values ($1, 'a-' || $2::text, $2, '{}', now() - make_interval(secs => $3),
               case when $4 = 'published' then now() end, case when $4 = 'dead' then now() end)`,
      [aggregateType, eventType, age, state],
    );
  }
}

beforeAll(async () => {
  await migrate(db.pool, { table });
  await insert([
    ["order", "order.created", 600, "pending"],
    ["order", "order.paid", 100, "pending"],
    // Routed by event type: the first route takes aggregate type order only.
    ["invoice", "payment.captured", 300, "pending"],
    ["refund", "payment.failed", 50, "pending"],
    // No route takes it, and there is no default.
    ["audit", "audit.logged", 30, "pending"],
    // Neither a dead letter nor a published row is pending.
    ["order", "order.created", 5000, "dead"],
    ["invoice", "payment.captured", 9000, "published"],
  ]);
});

function figures(snapshot: {
  byDestination?: { destination: string; pending: number; oldestPendingAgeSeconds: number }[];
}) {
  return (snapshot.byDestination ?? []).map(({ destination, pending, oldestPendingAgeSeconds }) => ({
    destination,
    pending,
    age: Math.floor(oldestPendingAgeSeconds / 10) * 10,
  }));
}

describe("the snapshot's backlog per destination", () => {
  it("routes each pending pair by the relay's route table: two routes and the events no route takes", async () => {
    const routes = routeTableFromEnv({ OUTBOX_ROUTES: ROUTES });

    const snapshot = await readOutboxSnapshot(db.pool, { table, statementTimeoutMs: 5_000, routes });

    expect(figures(snapshot)).toEqual([
      { destination: "sqs-fifo:orders.fifo", pending: 2, age: 600 },
      { destination: "kinesis:payments", pending: 2, age: 300 },
      { destination: "none", pending: 1, age: 30 },
    ]);
    expect(snapshot).toMatchObject({ pending: 5, deadLetters: 1, capped: false });
  });

  it("counts unmatched events under the default destination when there is one, and reports idle ones as 0", async () => {
    const routes = routeTableFromEnv({
      OUTBOX_ROUTES: JSON.stringify([
        ...JSON.parse(ROUTES),
        {
          match: { aggregateType: "customer" },
          destination: { kind: "sns", topicArn: "arn:aws:sns:eu-west-1:123456789012:customers" },
        },
      ]),
      OUTBOX_EVENT_BUS_NAME: "arn:aws:events:eu-west-1:123456789012:event-bus/default-bus",
    });

    const snapshot = await readOutboxSnapshot(db.pool, { table, statementTimeoutMs: 5_000, routes });

    expect(figures(snapshot)).toEqual([
      { destination: "sqs-fifo:orders.fifo", pending: 2, age: 600 },
      { destination: "kinesis:payments", pending: 2, age: 300 },
      { destination: "sns:customers", pending: 0, age: 0 },
      { destination: "eventbridge:default-bus", pending: 1, age: 30 },
    ]);
  });

  it("reads at most the cap of pairs, the oldest, and says so", async () => {
    const { pairs, capped } = await pendingByRoute(db.pool, names, 2);

    expect(capped).toBe(true);
    expect(pairs.map((pair) => pair.eventType)).toEqual(["order.created", "payment.captured"]);
    expect((await pendingByRoute(db.pool, names, 5)).capped).toBe(false);
  });

  it("is left out without a route table", async () => {
    const snapshot = await readOutboxSnapshot(db.pool, { table, statementTimeoutMs: 5_000 });

    expect(snapshot).not.toHaveProperty("byDestination");
    expect(routeTableFromEnv({ OUTBOX_QUEUE_URL: ORDERS })).toBeUndefined();
  });

  it("writes PendingEvents and OldestPendingAgeSeconds per destination, on lines with the destination dimension", async () => {
    const routes = routeTableFromEnv({ OUTBOX_ROUTES: ROUTES });
    const snapshot = await readOutboxSnapshot(db.pool, { table, statementTimeoutMs: 5_000, routes });
    let text = "";
    const spy = vi.spyOn(process.stdout, "write").mockImplementation(((chunk: unknown) => {
      text += String(chunk);
      return true;
    }) as typeof process.stdout.write);
    try {
      const metrics = new Metrics({ namespace: "Test", serviceName: "outbox-purge" });
      recordOutboxSnapshot(metrics, snapshot);
      metrics.publishStoredMetrics();
    } finally {
      spy.mockRestore();
    }
    const lines = text
      .split("\n")
      .filter((line) => line.includes('"_aws"'))
      .map((line) => JSON.parse(line));
    const perDestination = lines
      .filter((line) => line.destination !== undefined)
      .map((line) => ({
        destination: line.destination,
        dimensions: line._aws.CloudWatchMetrics[0].Dimensions,
        pending: line.PendingEvents,
        age:
          line.OldestPendingAgeSeconds === undefined
            ? undefined
            : Math.floor(line.OldestPendingAgeSeconds / 10) * 10,
      }));

    expect(perDestination).toEqual(
      expect.arrayContaining([
        {
          destination: "sqs-fifo:orders.fifo",
          dimensions: [["service", "destination"]],
          pending: 2,
          age: undefined,
        },
        {
          destination: "sqs-fifo:orders.fifo",
          dimensions: [["service", "destination"]],
          pending: undefined,
          age: 600,
        },
        {
          destination: "kinesis:payments",
          dimensions: [["service", "destination"]],
          pending: undefined,
          age: 300,
        },
        { destination: "none", dimensions: [["service", "destination"]], pending: 1, age: undefined },
      ]),
    );
    expect(perDestination).toHaveLength(6);
    // The outbox-wide line is unchanged: no destination dimension.
    expect(lines.find((line) => line.destination === undefined)).toMatchObject({ PendingEvents: 5 });
  });
});

describe("the per-pair statement's plan", () => {
  const big = "routed_big_events";
  const bigNames = outboxNames({ table: big });

  beforeAll(async () => {
    await migrate(db.pool, { table: big });
    // 200,000 published rows (what the purge has not deleted yet) and 20,000 pending over 40 pairs.
    await db.pool.query(
      `insert into ${bigNames.qualified} (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'type-' || (g % 8), 'agg-' || (g % 5000), 'event-' || (g % 5), '{}',
              now() - make_interval(secs => g % 3600), case when g > 20000 then now() end
       from generate_series(1, 220000) as g`,
    );
    await db.pool.query(`analyze ${bigNames.qualified}`);
  });

  it("reads the pending rows only, through the pending_group_live index", async () => {
    const { rows } = await db.pool.query(
      `explain (analyze, format json) ${pendingByRouteStatement(bigNames)}`,
      [1001],
    );
    const [plan] = rows[0]["QUERY PLAN"];
    const nodes = planNodes(plan.Plan as PlanNode);

    expect(nodes.filter((node) => node["Node Type"] === "Seq Scan")).toEqual([]);
    expect(new Set(nodes.flatMap((node) => node["Index Name"] ?? []))).toEqual(
      new Set(["routed_big_pending_group_live"]),
    );
    const scanned = nodes
      .filter((node) => node["Relation Name"] === big || node["Index Name"] !== undefined)
      .map((node) => (node["Actual Rows"] ?? 0) * (node["Actual Loops"] ?? 1));
    expect(Math.max(...scanned)).toBeLessThanOrEqual(20_000);
    expect((await pendingByRoute(db.pool, bigNames)).pairs).toHaveLength(40);
    console.log(
      `[pendingByRoute] 200k published + 20k pending rows, 40 pairs: ${plan["Execution Time"].toFixed(1)} ms, ` +
        nodes.map((node) => node["Node Type"]).join(" < "),
    );
  });
});
