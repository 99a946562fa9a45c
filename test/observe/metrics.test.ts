import { Metrics } from "@aws-lambda-powertools/metrics";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { Context, ScheduledEvent } from "aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { migrate } from "../../functions/shared/db/migrate.ts";
import {
  createMetrics,
  RelayMetrics,
  Reservoir,
  relayMetricsOptionsFromEnv,
} from "../../functions/shared/observe/metrics.ts";
import {
  outboxSnapshot,
  outboxSnapshotStatements,
} from "../../functions/shared/observe/sql/outboxSnapshot.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import type { RoundReport } from "../../functions/shared/relay/engine.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { relayLambdaEnv } from "../support/lambda.ts";
import { PRIVATE } from "../support/privateSchema.ts";

const db = useTestDatabase();

// ---- EMF: capture what the code writes to stdout and check each metrics line against the EMF specification.

interface EmfLine {
  namespace: string;
  dimensions: string[][];
  units: Record<string, string>;
  values: Record<string, number[]>;
  /** The line's top-level members (dimension values among them). */
  fields: Record<string, unknown>;
}

const CLOUDWATCH_UNITS = ["Count", "Milliseconds", "Seconds"];

/** Checks one line as CloudWatch would: directive, namespace, dimension values, metric values and units. */
function parseEmf(line: string): EmfLine {
  const doc = JSON.parse(line);
  expect(typeof doc._aws.Timestamp).toBe("number");
  expect(doc._aws.CloudWatchMetrics).toHaveLength(1);
  const [directive] = doc._aws.CloudWatchMetrics;
  expect(directive.Namespace).toMatch(/^[\w./#:-]{1,255}$/);
  expect(directive.Metrics.length).toBeLessThanOrEqual(100);
  for (const set of directive.Dimensions) {
    expect(set.length).toBeLessThanOrEqual(30);
    for (const key of set) expect(typeof doc[key]).toBe("string");
  }
  const units: Record<string, string> = {};
  const values: Record<string, number[]> = {};
  for (const metric of directive.Metrics as { Name: string; Unit: string }[]) {
    expect(CLOUDWATCH_UNITS).toContain(metric.Unit);
    const value = doc[metric.Name];
    const list: number[] = Array.isArray(value) ? value : [value];
    expect(list.length).toBeLessThanOrEqual(100);
    for (const item of list) expect(Number.isFinite(item)).toBe(true);
    units[metric.Name] = metric.Unit;
    values[metric.Name] = list;
  }
  return { namespace: directive.Namespace, dimensions: directive.Dimensions, units, values, fields: doc };
}

/** Swallows stdout while capturing it; `emf()` returns the EMF lines written so far, parsed and checked. */
function captureStdout() {
  let text = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation(((chunk: unknown) => {
    text += String(chunk);
    return true;
  }) as typeof process.stdout.write);
  return {
    emf: () =>
      text
        .split("\n")
        .filter((line) => line.startsWith("{") && line.includes('"_aws"'))
        .map(parseEmf),
    restore: () => spy.mockRestore(),
  };
}

function allValues(lines: EmfLine[], name: string): number[] {
  return lines.flatMap((line) => line.values[name] ?? []);
}

function round(overrides: Partial<RoundReport> = {}): RoundReport {
  return {
    claimed: 0,
    published: 0,
    failed: 0,
    deadLettered: 0,
    held: 0,
    loadTimeouts: 0,
    durationMs: 1,
    publishedEvents: [],
    failedEvents: [],
    ...overrides,
  };
}

function publishedRound(lags: number[], durationMs = 12): RoundReport {
  return round({
    claimed: lags.length,
    published: lags.length,
    durationMs,
    publishedEvents: lags.map((lagMs) => ({ eventType: "order.created", lagMs })),
  });
}

describe("RelayMetrics", () => {
  let stdout: ReturnType<typeof captureStdout>;
  let metrics: Metrics;
  beforeEach(() => {
    stdout = captureStdout();
    metrics = new Metrics({ namespace: "OutboxRelayTest", serviceName: "outbox-relay" });
  });
  afterEach(() => stdout.restore());

  it("writes a window's counters once, zeros included, with per-event-type failures on lines of their own", () => {
    const recorder = new RelayMetrics(metrics);
    recorder.recordRound(
      round({
        claimed: 5,
        published: 2,
        failed: 3,
        deadLettered: 1,
        durationMs: 40.4,
        publishedEvents: [
          { eventType: "order.created", lagMs: 120 },
          { eventType: "order.created", lagMs: 80 },
        ],
        failedEvents: [
          { eventType: "order.paid", deadLettered: false },
          { eventType: "order.paid", deadLettered: true },
          { eventType: "order.shipped", deadLettered: false },
        ],
      }),
    );
    recorder.recordRound(round()); // an idle round: no BatchDuration value

    recorder.finish();
    metrics.publishStoredMetrics();

    const lines = stdout.emf();
    const perType = lines.filter((line) => line.dimensions[0]?.includes("eventType"));
    expect(perType.map((line) => [line.fields.eventType, line.values.PublishFailures])).toEqual([
      ["order.paid", [2]],
      ["order.shipped", [1]],
    ]);
    for (const line of perType) expect(line.dimensions).toEqual([["service", "eventType"]]);
    const [main, ...rest] = lines.filter((line) => !perType.includes(line));
    expect(rest).toEqual([]);
    expect(main?.dimensions).toEqual([["service"]]);
    expect(main?.fields.service).toBe("outbox-relay");
    expect(main?.values).toEqual({
      BatchDuration: [40],
      PublishLag: [120, 80],
      EventsPublished: [2],
      PublishFailures: [3],
      EventsDeadLettered: [1],
      PayloadLoadTimeouts: [0],
      RelayHeartbeat: [1],
      // It published: no stall, though some of its events failed.
      RelayStalled: [0],
    });
    expect(main?.units).toEqual({
      BatchDuration: "Milliseconds",
      PublishLag: "Milliseconds",
      EventsPublished: "Count",
      PublishFailures: "Count",
      EventsDeadLettered: "Count",
      PayloadLoadTimeouts: "Count",
      RelayHeartbeat: "Count",
      RelayStalled: "Count",
    });

    // A window with nothing in it still says 0, so alarms see "no events" rather than "no data"; its heartbeat
    // says the relay ran; an idle window says nothing about a stall.
    recorder.finish();
    metrics.publishStoredMetrics();
    expect(stdout.emf().at(-1)?.values).toEqual({
      EventsPublished: [0],
      PublishFailures: [0],
      EventsDeadLettered: [0],
      PayloadLoadTimeouts: [0],
      RelayHeartbeat: [1],
    });
  });

  it("keeps RelayStalled at 1 through idle windows while events it failed to publish wait, until it publishes", () => {
    const recorder = new RelayMetrics(metrics);
    const windows = [
      round({ claimed: 2, failed: 2, failedEvents: [] }), // SQS refused both: stalled
      round(), // idle: the two wait in backoff, nothing published since
      publishedRound([5]), // progress
      round(), // idle: says nothing
    ];
    const stalled = windows.map((window) => {
      recorder.recordRound(window);
      recorder.finish();
      metrics.publishStoredMetrics();
      return stdout.emf().at(-1)?.values.RelayStalled;
    });
    expect(stalled).toEqual([[1], [1], [0], undefined]);
  });

  it("writes RelayStalled = 1 for a window whose rounds failed as a whole, and for a failed invocation", async () => {
    const recorder = new RelayMetrics(metrics);
    recorder.recordFailedRound();
    recorder.finish({ failedRounds: 1 });
    metrics.publishStoredMetrics();
    expect(stdout.emf().at(-1)?.values).toMatchObject({ RelayStalled: [1], FailedRounds: [1] });
    const failing = new RelayMetrics(metrics).observe(() =>
      Promise.reject(new Error("no route to the database")),
    );
    await expect(failing).rejects.toThrow("no route to the database");
    metrics.publishStoredMetrics();
    // The heartbeat written as it started, then the stall as it failed.
    expect(
      stdout
        .emf()
        .slice(-2)
        .map((line) => line.values.RelayStalled),
    ).toEqual([undefined, [1]]);
  });

  it("writes FailedRounds once per invocation, zero included", () => {
    const recorder = new RelayMetrics(metrics);
    recorder.finish({ failedRounds: 3 });
    metrics.publishStoredMetrics();
    expect(stdout.emf().at(-1)?.values).toMatchObject({ FailedRounds: [3] });
    recorder.finish({ failedRounds: 0 });
    metrics.publishStoredMetrics();
    expect(stdout.emf().at(-1)?.values).toMatchObject({ FailedRounds: [0] });
  });

  it('bounds the eventType dimension: the N types with most failures, the rest summed as "other"', () => {
    const recorder = new RelayMetrics(metrics, { maxEventTypes: 2 });
    // 500 distinct types failing once each, two failing more often.
    const failedEvents = [
      ...Array.from({ length: 500 }, (_, index) => ({ eventType: `type.${index}`, deadLettered: false })),
      ...Array.from({ length: 5 }, () => ({ eventType: "order.paid", deadLettered: false })),
      ...Array.from({ length: 3 }, () => ({ eventType: "order.shipped", deadLettered: false })),
    ];
    recorder.recordRound(round({ claimed: 508, failed: 508, failedEvents }));

    recorder.finish();
    metrics.publishStoredMetrics();

    const perType = stdout.emf().filter((line) => line.dimensions[0]?.includes("eventType"));
    expect(perType.map((line) => [line.fields.eventType, line.values.PublishFailures])).toEqual([
      ["order.paid", [5]],
      ["order.shipped", [3]],
      ["other", [500]],
    ]);
  });

  it("behind a route table, writes EventsPublished and PublishFailures per destination, zeros kept once seen", () => {
    let clock = 0;
    const recorder = new RelayMetrics(metrics, { flushIntervalMs: 10, now: () => clock });
    recorder.recordRound(
      round({
        claimed: 4,
        published: 3,
        failed: 1,
        destinations: {
          "sqs-fifo:orders.fifo": { published: 2, failed: 0 },
          "kinesis:clicks": { published: 1, failed: 1 },
        },
      }),
    );
    clock = 20;
    recorder.recordRound(round({ destinations: {} })); // the next window: nothing happened
    recorder.finish();
    metrics.publishStoredMetrics();

    const perDestination = stdout
      .emf()
      .filter((line) => line.dimensions[0]?.includes("destination"))
      .map((line) => [line.fields.destination, Object.keys(line.values)[0], Object.values(line.values)[0]]);
    expect(perDestination).toEqual([
      ["sqs-fifo:orders.fifo", "EventsPublished", [2]],
      ["sqs-fifo:orders.fifo", "PublishFailures", [0]],
      ["kinesis:clicks", "EventsPublished", [1]],
      ["kinesis:clicks", "PublishFailures", [1]],
      ["sqs-fifo:orders.fifo", "EventsPublished", [0]],
      ["sqs-fifo:orders.fifo", "PublishFailures", [0]],
      ["kinesis:clicks", "EventsPublished", [0]],
      ["kinesis:clicks", "PublishFailures", [0]],
    ]);
    // The totals are unchanged: one line per window, without the dimension.
    expect(
      allValues(
        stdout.emf().filter((line) => !line.dimensions[0]?.includes("destination")),
        "EventsPublished",
      ),
    ).toEqual([3, 0]);
  });

  it("behind a route table, counts unrouted events as UnroutedEvents of their own, zeros included (issue 38)", () => {
    let clock = 0;
    const recorder = new RelayMetrics(metrics, { flushIntervalMs: 10, now: () => clock });
    recorder.recordRound(
      round({
        claimed: 3,
        published: 1,
        failed: 2,
        destinations: {
          "sqs-fifo:orders.fifo": { published: 1, failed: 0 },
          none: { published: 0, failed: 2 },
        },
      }),
    );
    clock = 20;
    recorder.recordRound(round({ destinations: {} }));
    recorder.finish();
    metrics.publishStoredMetrics();

    const main = stdout.emf().filter((line) => !line.dimensions[0]?.includes("destination"));
    expect(allValues(main, "UnroutedEvents")).toEqual([2, 0]);
  });

  it("writes no UnroutedEvents without a route table", () => {
    const recorder = new RelayMetrics(metrics);
    recorder.recordRound(round({ claimed: 1, published: 1 }));
    recorder.finish();
    metrics.publishStoredMetrics();
    expect(allValues(stdout.emf(), "UnroutedEvents")).toEqual([]);
  });

  it("takes the eventType bound from RELAY_METRICS_EVENT_TYPES (default 10), naming the variable when wrong", () => {
    expect(relayMetricsOptionsFromEnv({})).toEqual({ maxEventTypes: 10 });
    expect(relayMetricsOptionsFromEnv({ RELAY_METRICS_EVENT_TYPES: "0" })).toEqual({ maxEventTypes: 0 });
    expect(() => relayMetricsOptionsFromEnv({ RELAY_METRICS_EVENT_TYPES: "1000" })).toThrow(
      /RELAY_METRICS_EVENT_TYPES must be an integer from 0 to 100/,
    );
  });

  it("keeps at most 99 PublishLag values per window, sampled from all of the window's events", () => {
    const recorder = new RelayMetrics(metrics);
    const lags = Array.from({ length: 1_000 }, (_, index) => 10_000 + index);
    for (let start = 0; start < lags.length; start += 100) {
      recorder.recordRound(publishedRound(lags.slice(start, start + 100)));
    }

    recorder.finish();
    metrics.publishStoredMetrics();

    const lines = stdout.emf();
    const sample = allValues(lines, "PublishLag");
    expect(sample).toHaveLength(99);
    expect(new Set(sample).size).toBe(99);
    for (const lag of sample) expect(lags).toContain(lag);
    // Reservoir sampling reaches past the first 99 offered (a truncating cap would not).
    expect(sample.filter((lag) => lag >= 10_099).length).toBeGreaterThan(50);
    expect(allValues(lines, "EventsPublished")).toEqual([1_000]);
    expect(allValues(lines, "BatchDuration")).toHaveLength(10);
  });

  it("writes one BatchDuration value per round that claimed something, at most 100 to a line", () => {
    const recorder = new RelayMetrics(metrics);
    for (let index = 0; index < 250; index++) {
      recorder.recordRound(publishedRound([5], index));
      recorder.recordRound(round()); // idle rounds in between add nothing
    }

    recorder.finish();
    metrics.publishStoredMetrics();

    const lines = stdout.emf();
    // Powertools writes a line when a metric reaches 100 values; the last window's line has the other 50.
    expect(lines.map((line) => line.values.BatchDuration?.length ?? 0)).toEqual([100, 100, 50]);
    expect(allValues(lines, "BatchDuration")).toEqual(Array.from({ length: 250 }, (_, index) => index));
    expect(allValues(lines, "EventsPublished")).toEqual([250]);
  });

  it("publishes every flush interval during a long invocation, not only when it ends", () => {
    let clock = 0;
    const recorder = new RelayMetrics(metrics, { flushIntervalMs: 10_000, now: () => clock });

    recorder.recordRound(publishedRound([100, 200]));
    clock = 9_999;
    recorder.recordRound(publishedRound([300]));
    expect(stdout.emf()).toEqual([]);
    clock = 10_000;
    recorder.recordRound(publishedRound([400]));
    const first = stdout.emf();
    clock = 15_000;
    recorder.recordRound(publishedRound([500]));
    recorder.finish();
    metrics.publishStoredMetrics();

    expect(first).toHaveLength(1);
    expect(first[0]?.values.EventsPublished).toEqual([4]);
    expect(first[0]?.values.PublishLag).toEqual([100, 200, 300, 400]);
    expect(stdout.emf().at(-1)?.values).toMatchObject({ EventsPublished: [1], PublishLag: [500] });
  });

  it("takes the namespace and service from the Powertools variables", () => {
    const configured = createMetrics(
      { POWERTOOLS_METRICS_NAMESPACE: "Sales", POWERTOOLS_SERVICE_NAME: "sales-outbox" },
      "outbox-relay",
    );
    new RelayMetrics(configured).finish();
    configured.publishStoredMetrics();
    createMetrics({}, "outbox-purge").addMetric("PurgedRows", "Count", 0).publishStoredMetrics();

    const [named, defaulted] = stdout.emf();
    expect([named?.namespace, named?.fields.service]).toEqual(["Sales", "sales-outbox"]);
    expect([defaulted?.namespace, defaulted?.fields.service]).toEqual(["OutboxRelay", "outbox-purge"]);
  });
});

describe("Reservoir", () => {
  it("keeps every value while under capacity, and starts afresh after take()", () => {
    const reservoir = new Reservoir(3, () => 0);
    reservoir.offer(1);
    reservoir.offer(2);
    expect(reservoir.take()).toEqual([1, 2]);
    reservoir.offer(3);
    expect(reservoir.take()).toEqual([3]);
  });
});

// ---- Snapshot: a table of its own, so its 100k published rows do not meet the handler tests' figures.

describe("outboxSnapshot", () => {
  const names = outboxNames({ table: "snapshot_events" });

  async function insert(rows: string) {
    await db.pool.query(
      `insert into ${names.qualified} (aggregate_type, aggregate_id, event_type, payload, created_at, attempts,
                                       available_at, processed_at, dead_lettered_at)
       values ${rows}`,
    );
  }

  beforeAll(async () => {
    await migrate(db.pool, { table: "snapshot_events" });
    // In seq order. Aggregates: a = head in backoff (blocked), b = fresh, c = dead head (blocked),
    // d = retry due (not blocked), e = dead head with a pending successor (blocked), f = backoff behind a
    // healthy head (not blocked: its head is claimable).
    await insert(`
      ('order', 'a', 'order.created', '{}', now() - interval '3600 seconds', 1, now() + interval '1 hour', null, null),
      ('order', 'a', 'order.paid',    '{}', now() - interval '3500 seconds', 0, now(), null, null),
      ('order', 'b', 'order.created', '{}', now(), 0, now(), null, null),
      ('order', 'c', 'order.paid',    '{}', now() - interval '2 days', 10, now(), null, now() - interval '1 day'),
      ('order', 'd', 'order.paid',    '{}', now() - interval '60 seconds', 2, now() - interval '1 second', null, null),
      ('order', 'e', 'order.created', '{}', now() - interval '2 days', 10, now(), null, now()),
      ('order', 'e', 'order.created', '{}', now() - interval '30 seconds', 0, now(), null, null),
      ('order', 'f', 'order.created', '{}', now() - interval '20 seconds', 0, now(), null, null),
      ('order', 'f', 'order.created', '{}', now() - interval '10 seconds', 3, now() + interval '1 hour', null, null)`);
    // g = head backing off after SQS's own failures (an outage): no attempt used, still blocked.
    await db.pool.query(
      `insert into ${names.qualified} (aggregate_type, aggregate_id, event_type, payload, transient_failures, available_at)
       values ('order', 'g', 'order.created', '{}', 4, now() + interval '1 hour')`,
    );
    // 100k published rows: what the purge has not deleted yet, and what the snapshot must not read.
    await db.pool.query(
      `insert into ${names.qualified} (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'published-' || (g % 5000), 'order.created', '{}', now() - interval '1 day', now()
       from generate_series(1, 100000) as g`,
    );
    await db.pool.query(`analyze ${names.qualified}`);
  });

  it("counts pending rows, their age, dead letters and blocked aggregates, in total and per event type", async () => {
    const snapshot = await outboxSnapshot(db.pool, names);

    expect(snapshot).toMatchObject({ pending: 8, deadLetters: 2, blockedAggregates: 4 });
    expect(snapshot.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(3600);
    expect(snapshot.oldestPendingAgeSeconds).toBeLessThan(3660);
    expect(
      snapshot.byEventType.map(({ eventType, pending, deadLetters }) => ({
        eventType,
        pending,
        deadLetters,
      })),
    ).toEqual([
      { eventType: "order.created", pending: 6, deadLetters: 1 },
      { eventType: "order.paid", pending: 2, deadLetters: 1 },
    ]);
    const paid = snapshot.byEventType.find((type) => type.eventType === "order.paid");
    expect(paid?.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(3500);
    expect(paid?.oldestPendingAgeSeconds).toBeLessThan(3560);
  });

  it("reads only unpublished rows, through the partial indexes, however many published rows there are", async () => {
    const timings: string[] = [];
    for (const [name, statement] of Object.entries(outboxSnapshotStatements(names))) {
      const { rows } = await db.pool.query(`explain (analyze, format json) ${statement}`);
      const [plan] = rows[0]["QUERY PLAN"];
      const nodes = planNodes(plan.Plan);

      expect(nodes.filter((node) => node["Node Type"] === "Seq Scan")).toEqual([]);
      const indexes = nodes.flatMap((node) => node["Index Name"] ?? []);
      expect(indexes.length).toBeGreaterThan(0);
      for (const index of indexes) {
        expect([
          "snapshot_pending_group_live",
          "snapshot_pending_dead",
          "snapshot_dead_lettered_at",
        ]).toContain(index);
      }
      // Rows read from the table: the 10 unpublished ones, not the 100,000 published.
      const scanned = nodes
        .filter((node) => node["Relation Name"] === "snapshot_events" || node["Index Name"] !== undefined)
        .map((node) => node["Actual Rows"] * (node["Actual Loops"] ?? 1));
      expect(Math.max(...scanned)).toBeLessThanOrEqual(10);
      timings.push(`${name} ${plan["Execution Time"].toFixed(2)} ms via ${[...new Set(indexes)].join(", ")}`);
    }
    console.log(`[snapshot] 100k published + 10 unpublished rows: ${timings.join("; ")}`);
  });
});

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows": number;
  "Actual Loops"?: number;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

// ---- The real Lambda handlers, invoked as Lambda would, their stdout checked against the database.

const scheduledEvent: ScheduledEvent = {
  version: "0",
  id: "7f0c3a51-1111-2222-3333-444455556666",
  "detail-type": "Scheduled Event",
  source: "aws.events",
  account: "123456789012",
  time: new Date().toISOString(),
  region: "us-east-1",
  resources: ["arn:aws:events:us-east-1:123456789012:rule/outbox-schedule"],
  detail: {},
};

function lambdaContext(functionName: string, remainingMs: number): Context {
  const deadline = Date.now() + remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: "512",
    awsRequestId: "d1e0a6b2-7b61-11e6-9a41-93e812345678",
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: "2026/11/29/[$LATEST]abcdef",
    getRemainingTimeInMillis: () => deadline - Date.now(),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

describe("Lambda handlers write EMF with the figures the database holds", () => {
  let fake: FakeSqs;
  let stdout: ReturnType<typeof captureStdout>;

  beforeAll(async () => {
    fake = await startFakeSqs();
    const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url });
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: "metrics.fifo", Attributes: { FifoQueue: "true" } }),
    );
    sqs.destroy();
    for (const name of ["POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_DEV"]) {
      delete process.env[name];
    }
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: db.url,
        OUTBOX_QUEUE_URL: QueueUrl as string,
        AWS_ENDPOINT_URL: fake.url,
        RELAY_MODE: "drain",
        RELAY_PUBLISH_TIMEOUT_MS: "1000",
        RELAY_STATEMENT_TIMEOUT_MS: "500",
        PURGE_BUDGET_MARGIN_MS: "500",
        PURGE_STATEMENT_TIMEOUT_MS: "1000",
        POWERTOOLS_LOG_LEVEL: "ERROR",
      }),
    );
  });
  afterAll(async () => {
    await fake.close();
  });
  beforeEach(async () => {
    await db.pool.query("delete from outbox_events");
    stdout = captureStdout();
  });
  afterEach(() => stdout.restore());

  it("purge: one line per run with the purged rows and the outbox snapshot", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'old-' || g, 'order.created', '{}'::jsonb, now() - interval '201 hours',
              now() - interval '200 hours'
       from generate_series(1, 7) as g
       union all
       select 'order', 'recent-' || g, 'order.created', '{}', now() - interval '2 hours', now() - interval '1 hour'
       from generate_series(1, 3) as g`,
    );
    // a: head in backoff (blocked); b: fresh; c: dead head (blocked); d: retry due; e: dead head + successor.
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, attempts,
                                  available_at, dead_lettered_at)
       values ('order', 'a', 'order.created', '{}', now() - interval '3600 seconds', 1, now() + interval '1 hour', null),
              ('order', 'a', 'order.paid', '{}', now() - interval '3500 seconds', 0, now(), null),
              ('order', 'b', 'order.created', '{}', now(), 0, now(), null),
              ('order', 'c', 'order.paid', '{}', now() - interval '2 days', 10, now(), now() - interval '1 day'),
              ('order', 'd', 'order.paid', '{}', now() - interval '60 seconds', 2, now() - interval '1 second', null),
              ('order', 'e', 'order.created', '{}', now() - interval '2 days', 10, now(), now()),
              ('order', 'e', 'order.created', '{}', now() - interval '30 seconds', 0, now(), null)`,
    );
    const { handler } = await import("../../functions/purge/handler.ts");
    const started = performance.now();

    const summary = await handler(scheduledEvent, lambdaContext("outbox-purge", 5_000));
    const elapsedMs = performance.now() - started;

    expect(summary).toMatchObject({ deletedRows: 7, deletedDeadLetters: 0, stoppedBy: "drained" });
    const { rows } = await db.pool.query(
      `select count(*) filter (where processed_at is null and dead_lettered_at is null)::int as pending,
              count(*) filter (where dead_lettered_at is not null)::int as dead,
              count(*) filter (where processed_at is not null)::int as published,
              extract(epoch from now() - min(created_at) filter (where processed_at is null
                                                                 and dead_lettered_at is null))::float8 as oldest
       from outbox_events`,
    );
    expect(rows[0]).toMatchObject({ pending: 5, dead: 2, published: 3 });
    const lines = stdout.emf();
    expect(lines).toHaveLength(1);
    const [line] = lines;
    expect(line?.namespace).toBe("OutboxRelay");
    expect(line?.dimensions).toEqual([["service"]]);
    expect(line?.fields.service).toBe("outbox-purge");
    expect(line?.units).toEqual({
      PurgedRows: "Count",
      PurgeDuration: "Milliseconds",
      PendingEvents: "Count",
      OldestPendingAgeSeconds: "Seconds",
      DeadLetters: "Count",
      BlockedAggregates: "Count",
      SnapshotErrors: "Count",
      PurgeErrors: "Count",
    });
    expect(line?.values).toMatchObject({
      SnapshotErrors: [0],
      PurgeErrors: [0],
      PurgedRows: [7],
      PendingEvents: [rows[0].pending],
      DeadLetters: [rows[0].dead],
      BlockedAggregates: [3],
    });
    const [oldest] = line?.values.OldestPendingAgeSeconds ?? [];
    expect(oldest).toBeGreaterThanOrEqual(3600);
    expect(oldest).toBeLessThanOrEqual(rows[0].oldest);
    const [duration] = line?.values.PurgeDuration ?? [];
    expect(duration).toBe("durationMs" in summary ? summary.durationMs : Number.NaN);
    expect(duration).toBeLessThanOrEqual(elapsedMs);
  });

  it("purge, snapshot-only event (the every-minute metrics schedule): the snapshot line, nothing deleted", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       values ('order', 'old-1', 'order.created', '{}', now() - interval '300 hours', now() - interval '300 hours'),
              ('order', 'new-1', 'order.created', '{}', now() - interval '90 seconds', null)`,
    );
    const { handler } = await import("../../functions/purge/handler.ts");

    const result = await handler({ snapshotOnly: true }, lambdaContext("outbox-purge", 5_000));

    expect(result).toEqual({ snapshotOnly: true });
    const { rows } = await db.pool.query("select count(*)::int as n from outbox_events");
    expect(rows[0].n).toBe(2);
    const [line] = stdout.emf();
    expect(line?.values).toMatchObject({ PendingEvents: [1], DeadLetters: [0], SnapshotErrors: [0] });
    expect(line?.values.PurgedRows).toBeUndefined();
  });

  /**
   * In each retention mode (OUTBOX_RETENTION), EventsPublished is what the table says was published: the rows the
   * relay marked (keep), whose processed_at also gives each event's stored lag, or the deleted-on-publish counter
   * (delete, migration 0011), where no row is left to give a lag: the relay's own lag is then bounded by the
   * event's age when the invocation ended.
   */
  it.each(["keep", "delete"] as const)(
    "relay (retention %s): counters, per-type failures, lag of every event and one batch duration per claiming round",
    async (retention) => {
      // Eight good events, created 42 s ago (so their lag is easy to recognise), and one row SQS would refuse
      // (a space in its group id): dead-lettered at once, as a malformed row put in by hand must be.
      await db.pool.query(
        `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
         select 'order', 'order-' || g, case when g <= 5 then 'order.created' else 'order.paid' end,
                jsonb_build_object('n', g), now() - interval '42 seconds'
         from generate_series(1, 8) as g
         union all
         select 'order', 'bad id', 'order.broken', '{}'::jsonb, now() - interval '42 seconds'`,
      );
      const { rows: counted } = await db.pool.query(
        `select events from ${PRIVATE}.outbox_deleted_on_publish`,
      );
      vi.resetModules();
      vi.stubEnv("OUTBOX_RETENTION", retention);
      const { handler } = await import("../../functions/relay/handler.ts");
      vi.unstubAllEnvs();

      const summary = await handler(scheduledEvent, lambdaContext("outbox-relay", 5_000));
      const ageMs = (
        await db.pool.query(
          "select max(extract(epoch from now() - created_at) * 1000)::float8 as ms from outbox_events",
        )
      ).rows[0].ms;

      expect(summary).toMatchObject({ published: 8, failed: 1, deadLettered: 1, stoppedBy: "drained" });
      const { rows: lagRows } = await db.pool.query<{ lag_ms: number }>(
        `select (extract(epoch from processed_at - created_at) * 1000)::float8 as lag_ms
         from outbox_events where processed_at is not null order by lag_ms`,
      );
      const { rows: deleted } = await db.pool.query(
        `select events from ${PRIVATE}.outbox_deleted_on_publish`,
      );
      const published = lagRows.length + Number(deleted[0].events) - Number(counted[0].events);
      const { rows: deadRows } = await db.pool.query(
        "select event_type from outbox_events where dead_lettered_at is not null",
      );
      expect(lagRows).toHaveLength({ keep: 8, delete: 0 }[retention]);
      expect(published).toBe(8);
      expect(deadRows).toEqual([{ event_type: "order.broken" }]);

      const lines = stdout.emf();
      for (const line of lines)
        expect([line.namespace, line.fields.service]).toEqual(["OutboxRelay", "outbox-relay"]);
      const perType = lines.filter((line) => line.dimensions[0]?.includes("eventType"));
      expect(perType).toHaveLength(1);
      expect(perType[0]?.dimensions).toEqual([["service", "eventType"]]);
      expect(perType[0]?.fields.eventType).toBe("order.broken");
      expect(perType[0]?.values).toEqual({ PublishFailures: [1] });
      // The heartbeat written as the invocation starts, then the window its end stores.
      const [started, ...main] = lines.filter((line) => !perType.includes(line));
      expect(started?.values).toEqual({
        EventsPublished: [0],
        PublishFailures: [0],
        EventsDeadLettered: [0],
        PayloadLoadTimeouts: [0],
        RelayHeartbeat: [1],
      });
      expect(main).toHaveLength(1);
      expect(main[0]?.dimensions).toEqual([["service"]]);
      expect(main[0]?.values).toMatchObject({
        EventsPublished: [published],
        PublishFailures: [deadRows.length],
        EventsDeadLettered: [deadRows.length],
        RelayHeartbeat: [1],
        RelayStalled: [0],
      });
      // One round claimed all nine rows; the drain's second round found nothing.
      expect(main[0]?.values.BatchDuration).toHaveLength(1);
      expect(main[0]?.units).toMatchObject({ BatchDuration: "Milliseconds", PublishLag: "Milliseconds" });
      // The relay measures lag just after its commit; the database stamped processed_at just before.
      const lags = [...(main[0]?.values.PublishLag ?? [])].sort((a, b) => a - b);
      expect(lags).toHaveLength(8);
      lags.forEach((lag, index) => {
        expect(lag).toBeGreaterThanOrEqual(42_000);
        expect(lag).toBeLessThanOrEqual(ageMs);
        if (retention === "delete") return;
        const stored = lagRows[index]?.lag_ms ?? Number.NaN;
        expect(lag - stored).toBeGreaterThanOrEqual(-5);
        expect(lag - stored).toBeLessThan(1_000);
      });
    },
  );
});

describe("purge handler: the snapshot and the purge cannot stop each other", () => {
  let stdout: ReturnType<typeof captureStdout>;
  const roles: string[] = [];
  beforeEach(async () => {
    await db.pool.query("delete from outbox_events");
    // Seven published rows past the retention, one pending row.
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'old-' || g, 'order.created', '{}'::jsonb, now() - interval '201 hours',
              now() - interval '200 hours'
       from generate_series(1, 7) as g
       union all select 'order', 'pending', 'order.created', '{}', now(), null`,
    );
    stdout = captureStdout();
  });
  afterEach(() => stdout.restore());
  afterAll(async () => {
    vi.resetModules();
    process.env.DATABASE_URL = db.url;
    for (const role of roles) await db.pool.query(`drop owned by ${role}; drop role ${role}`);
  });

  /** A fresh container of the purge handler, connecting as a role with only the given privileges. */
  async function purgeHandlerAs(grants: string) {
    const role = `purge_${roles.length}_${Date.now()}`;
    roles.push(role);
    await db.pool.query(`create role ${role} login password 'purge'`);
    await db.pool.query(grants.replaceAll("$role", role));
    const url = new URL(db.url);
    url.username = role;
    url.password = "purge";
    vi.resetModules();
    Object.assign(process.env, {
      DATABASE_URL: url.toString(),
      PURGE_BUDGET_MARGIN_MS: "500",
      PURGE_STATEMENT_TIMEOUT_MS: "1000",
    });
    return (await import("../../functions/purge/handler.ts")).handler;
  }

  async function remaining() {
    const { rows } = await db.pool.query(
      "select count(*) filter (where processed_at is not null)::int as published from outbox_events",
    );
    return rows[0].published;
  }

  it("purges when the snapshot fails, counts SnapshotErrors and fails the invocation", async () => {
    // Enough to purge (the columns its statements read and lock FOR UPDATE, delete, and the group high-water
    // marks the published rows leave behind, migration 0006; the roles table, whose database the purge checks
    // first, migration 0018), not to read the snapshot's columns.
    const handler = await purgeHandlerAs(
      "grant select (ctid, processed_at, dead_lettered_at, aggregate_id, seq), update (processed_at), delete " +
        `on outbox_events to $role; grant select, insert, update on ${PRIVATE}.outbox_group_high_water to $role; ` +
        `grant select on ${PRIVATE}.outbox_roles to $role`,
    );

    const invocation = handler(scheduledEvent, lambdaContext("outbox-purge", 5_000));

    await expect(invocation).rejects.toThrow(/^outbox snapshot failed: [^;]*permission denied[^;]*$/);
    expect(await remaining()).toBe(0);
    const [line] = stdout.emf();
    expect(line?.values).toMatchObject({ SnapshotErrors: [1], PurgeErrors: [0], PurgedRows: [7] });
    expect(line?.values.PendingEvents).toBeUndefined();
  });

  it("reports the snapshot when the purge fails, counts PurgeErrors and fails the invocation", async () => {
    const handler = await purgeHandlerAs("grant select on outbox_events to $role");

    const invocation = handler(scheduledEvent, lambdaContext("outbox-purge", 5_000));

    await expect(invocation).rejects.toThrow(/purge stopped by an error: .*permission denied/);
    expect(await remaining()).toBe(7);
    const [line] = stdout.emf();
    expect(line?.values).toMatchObject({ SnapshotErrors: [0], PurgeErrors: [1], PendingEvents: [1] });
  });
});
