import { Metrics } from "@aws-lambda-powertools/metrics";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { METRIC } from "../../functions/shared/observe/metricNames.ts";
import { RelayMetrics } from "../../functions/shared/observe/metrics.ts";
import { type RelayDeps, type RelayOptions, runRelay } from "../../functions/shared/relay/engine.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { writeEvents } from "../support/outboxRows.ts";
import { queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * The alarms page from the relay's own EMF lines (infra/alarms.ts: RelayNotRunning reads RelayHeartbeat,
 * RelayStalled reads RelayStalled), so those lines must be written while an invocation runs, within one flush
 * interval of what they report, not when it ends (Lambda's own metrics do that, up to its 155 s timeout late).
 * Each test runs a dwell invocation with a deadline a minute away and stops it once the line it waits for is
 * written.
 */

const db = useTestDatabase();
const aws = useFakeSqs();

const FLUSH_MS = 1_000;
/** What a busy 2-core machine may add to a timer; far below the minute the invocation would still run. */
const TIMER_SLACK_MS = 500;

interface Line {
  at: number;
  values: Record<string, number[]>;
}

/** Captures the EMF lines written to stdout, with when each was written; `next()` waits for one that matches. */
function captureEmf() {
  const lines: Line[] = [];
  const waiters: { match: (line: Line) => boolean; resolve: (line: Line) => void }[] = [];
  const spy = vi.spyOn(process.stdout, "write").mockImplementation(((chunk: unknown) => {
    for (const text of String(chunk).split("\n")) {
      if (!text.startsWith("{") || !text.includes('"_aws"')) continue;
      const doc = JSON.parse(text);
      const values: Record<string, number[]> = {};
      for (const { Name } of doc._aws.CloudWatchMetrics[0].Metrics as { Name: string }[]) {
        values[Name] = [doc[Name]].flat();
      }
      const line = { at: performance.now(), values };
      lines.push(line);
      for (const waiter of waiters.filter((one) => one.match(line))) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
    return true;
  }) as typeof process.stdout.write);
  return {
    lines,
    next(match: (line: Line) => boolean, after = 0): Promise<Line> {
      const seen = lines.find((line) => line.at >= after && match(line));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) =>
        waiters.push({ match: (line) => line.at >= after && match(line), resolve }),
      );
    },
    restore: () => spy.mockRestore(),
  };
}

const has = (name: string, value: number) => (line: Line) => line.values[name]?.includes(value) === true;

/** A dwell invocation observed as the handler observes it; `stop()` ends it and returns its summary. */
function startInvocation(deps: Omit<RelayDeps, "deadline" | "signal">, options: RelayOptions) {
  const recorder = new RelayMetrics(
    new Metrics({ namespace: "OutboxRelayTest", serviceName: "outbox-relay" }),
    {
      flushIntervalMs: FLUSH_MS,
    },
  );
  const observer = recorder.observer();
  const stop = new AbortController();
  let firstFailure: number | undefined;
  let settled = false;
  recorder.start();
  const running = runRelay(
    {
      ...deps,
      deadline: Date.now() + 60_000,
      signal: stop.signal,
      onRound: (report) => {
        if (report.failed > 0) firstFailure ??= performance.now();
        observer.onRound(report);
      },
      onRoundFailed: (error) => {
        firstFailure ??= performance.now();
        observer.onRoundFailed();
        void error;
      },
    },
    { ...options, mode: "dwell", parallelRounds: 2 },
  ).finally(() => {
    settled = true;
  });
  return {
    firstFailure: () => firstFailure,
    running: () => !settled,
    async stop() {
      stop.abort();
      const summary = await running;
      recorder.finish({ failedRounds: summary.failedRounds });
      return summary;
    },
  };
}

let stdout: ReturnType<typeof captureEmf>;
beforeEach(async () => {
  aws.fake.resetFaults();
  aws.fake.up();
  await db.pool.query("delete from outbox_events");
  stdout = captureEmf();
});
afterEach(() => stdout.restore());

describe("the relay's heartbeat and stall lines are written while it runs", () => {
  it("writes a heartbeat as the invocation starts and every flush interval after, idle", async () => {
    const queue = await createFifoQueue(aws.sqs, "heartbeat");
    const started = performance.now();
    const invocation = startInvocation(
      { pool: db.pool, destination: queueDestination(aws.sqs, { queueUrl: queue }) },
      testRelayOptions(queue),
    );

    const first = await stdout.next(has(METRIC.relayHeartbeat, 1));
    const second = await stdout.next(has(METRIC.relayHeartbeat, 1), first.at + 1);

    expect(invocation.running()).toBe(true);
    expect(first.at - started).toBeLessThan(TIMER_SLACK_MS);
    expect(second.at - first.at).toBeLessThan(FLUSH_MS + TIMER_SLACK_MS);
    // Idle: nothing to report about progress, so no stall value either way.
    expect(stdout.lines.flatMap((line) => line.values[METRIC.relayStalled] ?? [])).toEqual([]);
    const summary = await invocation.stop();
    expect(summary).toMatchObject({ published: 0, failedRounds: 0, stoppedBy: "signal" });
  });

  const faults: [string, () => void][] = [
    ["SQS is down (connections reset)", () => aws.fake.down()],
    [
      "SendMessageBatch is denied (AccessDenied)",
      () =>
        aws.fake.setFaults({
          failRequests: (action) =>
            action === "SendMessageBatch" && { code: "AccessDenied", status: 403, message: "not authorized" },
        }),
    ],
  ];
  it.each(faults)(
    "writes RelayStalled = 1 within one flush interval when %s, mid-invocation",
    async (_, fault) => {
      const queue = await createFifoQueue(aws.sqs, "stall");
      await writeEvents(
        db.pool,
        Array.from({ length: 20 }, (_, i) => anEvent({ aggregateId: `stall-${i % 4}` })),
      );
      fault();
      const invocation = startInvocation(
        { pool: db.pool, destination: queueDestination(aws.sqs, { queueUrl: queue }) },
        testRelayOptions(queue, { backoffBaseMs: 60_000, backoffMaxMs: 60_000, publishTimeoutMs: 2_000 }),
      );

      const stalled = await stdout.next(has(METRIC.relayStalled, 1));

      expect(invocation.running()).toBe(true);
      const failedAt = invocation.firstFailure() ?? Number.NaN;
      expect(stalled.at - failedAt).toBeLessThan(FLUSH_MS + TIMER_SLACK_MS);
      expect(stalled.values[METRIC.eventsPublished]).toEqual([0]);
      const summary = await invocation.stop();
      expect(summary.published).toBe(0);
      expect(summary.failed).toBeGreaterThan(0);
      const { rows } = await db.pool.query(
        "select count(*)::int as n from outbox_events where processed_at is null and dead_lettered_at is null",
      );
      expect(rows[0].n).toBe(20);
    },
  );

  it("writes RelayStalled = 1 within one flush interval when the database cannot be reached, mid-invocation", async () => {
    const queue = await createFifoQueue(aws.sqs, "stall-db");
    // A port nobody listens on: every round's connect is refused.
    const unreachable = new pg.Pool({
      connectionString: "postgres://relay@127.0.0.1:1/outbox",
      connectionTimeoutMillis: 500,
    });
    unreachable.on("error", () => {});
    const invocation = startInvocation(
      { pool: unreachable, destination: queueDestination(aws.sqs, { queueUrl: queue }) },
      testRelayOptions(queue),
    );

    const stalled = await stdout.next(has(METRIC.relayStalled, 1));

    expect(invocation.running()).toBe(true);
    expect(stalled.at - (invocation.firstFailure() ?? Number.NaN)).toBeLessThan(FLUSH_MS + TIMER_SLACK_MS);
    expect(stalled.values[METRIC.relayHeartbeat]).toEqual([1]);
    const summary = await invocation.stop();
    expect(summary).toMatchObject({ rounds: 0, published: 0 });
    expect(summary.failedRounds).toBeGreaterThan(0);
    await unreachable.end();
  });

  it("writes RelayStalled = 0 for a window that published", async () => {
    const queue = await createFifoQueue(aws.sqs, "progress");
    await writeEvents(db.pool, [anEvent({ aggregateId: "progress-1" })]);
    const invocation = startInvocation(
      { pool: db.pool, destination: queueDestination(aws.sqs, { queueUrl: queue }) },
      testRelayOptions(queue),
    );

    const line = await stdout.next(has(METRIC.relayStalled, 0));

    expect(invocation.running()).toBe(true);
    expect(line.values[METRIC.eventsPublished]).toEqual([1]);
    await invocation.stop();
  });
});
