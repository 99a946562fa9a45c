import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { NO_ROUTE_DESTINATION } from "../destinations/routing/table.ts";
import type { PurgeSummary } from "../purge/purge.ts";
import type { RoundReport } from "../relay/engine.ts";
import type { Env } from "../util/env.ts";
import { readInteger, readText } from "../util/settings.ts";
import { METRIC } from "./metricNames.ts";
import { DEFAULT_METRICS_EVENT_TYPES, METRICS_SETTINGS, serviceNameFromEnv } from "./settings.ts";
import type { RoutedOutboxSnapshot } from "./snapshot.ts";

/**
 * CloudWatch metrics, written as Embedded Metric Format log lines through Powertools Metrics (no
 * PutMetricData calls: CloudWatch extracts them from the function's log stream). docs/metrics.md lists every
 * metric with its unit, dimensions and the alarms it drives.
 */

/** The extra dimension of the per-event-type PublishFailures. */
export const EVENT_TYPE_DIMENSION = "eventType";

/**
 * The extra dimension of the per-destination EventsPublished and PublishFailures, behind a route table: the
 * destination's name (`sqs-fifo:orders.fifo`, `kinesis:clicks`, `none` for events no route takes).
 */
export const DESTINATION_DIMENSION = "destination";

/** The eventType value under which the failures of the types beyond the top N are summed. */
export const OTHER_EVENT_TYPES = "other";

/** Namespace from POWERTOOLS_METRICS_NAMESPACE, service dimension from POWERTOOLS_SERVICE_NAME. */
export function createMetrics(env: Env, defaultServiceName: string): Metrics {
  return new Metrics({
    namespace: readText(env, METRICS_SETTINGS.namespace),
    serviceName: serviceNameFromEnv(env, defaultServiceName),
  });
}

/**
 * What one purge run did. Stored, not published: the handler's logMetrics middleware publishes at the end.
 * PurgeErrors is written every run, 0 or 1, so an alarm on it sees 0 rather than missing data.
 */
export function recordPurgeSummary(metrics: Metrics, summary: PurgeSummary): void {
  metrics.addMetric(METRIC.purgedRows, MetricUnit.Count, summary.deletedRows + summary.deletedDeadLetters);
  metrics.addMetric(METRIC.purgeDuration, MetricUnit.Milliseconds, Math.round(summary.durationMs));
  metrics.addMetric(METRIC.purgeErrors, MetricUnit.Count, summary.stoppedBy === "error" ? 1 : 0);
}

/** A snapshot that could not be read: its figures are missing (their alarms treat that as breaching). */
export function recordSnapshotError(metrics: Metrics): void {
  metrics.addMetric(METRIC.snapshotErrors, MetricUnit.Count, 1);
}

/**
 * How the outbox stands, once per purge run (scheduled every minute, the alarms' period). Behind a route table,
 * PendingEvents and OldestPendingAgeSeconds per destination too, on lines of their own with the relay's
 * `destination` dimension (every destination each run, zeros included: their alarms see 0, not missing data).
 */
export function recordOutboxSnapshot(metrics: Metrics, snapshot: RoutedOutboxSnapshot): void {
  metrics.addMetric(METRIC.snapshotErrors, MetricUnit.Count, 0);
  metrics.addMetric(METRIC.pendingEvents, MetricUnit.Count, snapshot.pending);
  metrics.addMetric(
    METRIC.oldestPendingAgeSeconds,
    MetricUnit.Seconds,
    seconds(snapshot.oldestPendingAgeSeconds),
  );
  metrics.addMetric(METRIC.deadLetters, MetricUnit.Count, snapshot.deadLetters);
  metrics.addMetric(METRIC.blockedAggregates, MetricUnit.Count, snapshot.blockedAggregates);
  for (const place of snapshot.byDestination ?? []) {
    metrics
      .singleMetric()
      .addDimension(DESTINATION_DIMENSION, place.destination)
      .addMetric(METRIC.pendingEvents, MetricUnit.Count, place.pending);
    metrics
      .singleMetric()
      .addDimension(DESTINATION_DIMENSION, place.destination)
      .addMetric(METRIC.oldestPendingAgeSeconds, MetricUnit.Seconds, seconds(place.oldestPendingAgeSeconds));
  }
}

/** Milliseconds' precision is all an age alarm needs. */
function seconds(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/**
 * 99, not 100: Powertools writes the line as soon as one metric holds 100 values, which would split a window's
 * figures over two lines (and leave the store empty for the end-of-invocation publish, which then warns).
 */
const LAG_SAMPLES_PER_WINDOW = 99;

/** The relay's metrics settings from its environment (read once, at cold start). */
export function relayMetricsOptionsFromEnv(env: Env): RelayMetricsOptions {
  return { maxEventTypes: readInteger(env, METRICS_SETTINGS.maxEventTypes) };
}

export interface RelayMetricsOptions {
  /** Per-event-type PublishFailures lines per window; the rest are summed as "other" (0: totals only). */
  maxEventTypes?: number;
  /** A long (dwell) invocation publishes its figures at least this often, not only when it ends. */
  flushIntervalMs?: number;
  /** PublishLag values kept per window: a uniform sample of the window's events. */
  lagSamplesPerWindow?: number;
  now?: () => number;
  random?: () => number;
}

/**
 * The relay's metrics, fed by the engine's onRound callback. Log volume decides the shape. At the FIFO queue's
 * default 3,000 messages/s, one PublishLag value per event is 3,000 values/s; Powertools writes a line per 100
 * values of a metric (~670 bytes), so 30 lines/s, ~1.7 GB of logs a day per relay, ~$0.85/day of ingestion at
 * $0.50/GB. Instead:
 * - counters (EventsPublished, PublishFailures, EventsDeadLettered, PayloadLoadTimeouts) are summed per window (10 s, and the
 *   invocation's end) and written once, zeros included, so alarms see 0 rather than missing data;
 * - PublishLag keeps a uniform random sample of at most 99 of the window's lags (reservoir sampling), exact
 *   when the window had 99 events or fewer; CloudWatch then estimates percentiles from ~600 values a minute
 *   per busy relay: enough for p50/p99 dashboards and alarms;
 * - BatchDuration keeps one value per round that claimed something (a p95 alarm wants every round); at 30
 *   rounds/s Powertools writes a line of 100 of them every ~3 s.
 * A relay at full speed then writes ~24 lines (~16 KB) a minute, ~23 MB a day.
 *
 * The alarms page from what these lines carry, stamped when they are written (DESIGN.md, invariant 11), not from
 * Lambda's own metrics, which arrive when an invocation ends and are stamped with its start:
 * - RelayHeartbeat, 1 on every window's line: once `start()` is called, a timer writes a window every
 *   `flushIntervalMs` (and one at once), idle or not, whether rounds succeed, fail or hang. A live relay writes
 *   at least one a minute; their absence is RelayNotRunning.
 * - RelayStalled, on the line of a window in which the relay did something: 1 when rounds failed as a whole or
 *   publishes failed short of a dead letter and nothing was published (an SQS outage, AccessDenied, the database
 *   unreachable), 0 when it published (or settled events as dead letters); an idle window writes none, unless
 *   events this invocation failed to publish wait in backoff with nothing published since (1). The
 *   handler also writes 1 when the invocation itself fails (a setting, the queue check, the database at start).
 */
export class RelayMetrics {
  readonly #metrics: Metrics;
  readonly #flushIntervalMs: number;
  readonly #maxEventTypes: number;
  readonly #now: () => number;
  readonly #lag: Reservoir;
  #windowStart: number;
  #published = 0;
  #failed = 0;
  #deadLettered = 0;
  #failedRounds = 0;
  #loadTimeouts = 0;
  /** Events failed to publish (not dead letters) and nothing published since: they wait in backoff. */
  #awaitingRetry = false;
  readonly #failuresByType = new Map<string, number>();
  /** Per destination behind a router; a destination seen once keeps a line (zeros included) every window. */
  readonly #byDestination = new Map<string, { published: number; failed: number }>();
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(metrics: Metrics, options: RelayMetricsOptions = {}) {
    this.#metrics = metrics;
    this.#flushIntervalMs = options.flushIntervalMs ?? 10_000;
    this.#maxEventTypes = options.maxEventTypes ?? DEFAULT_METRICS_EVENT_TYPES;
    this.#now = options.now ?? Date.now;
    this.#lag = new Reservoir(
      options.lagSamplesPerWindow ?? LAG_SAMPLES_PER_WINDOW,
      options.random ?? Math.random,
    );
    this.#windowStart = this.#now();
  }

  recordRound(report: RoundReport): void {
    if (report.claimed > 0) {
      // Straight into the store: Powertools writes the line itself when the 100th value arrives.
      this.#metrics.addMetric(METRIC.batchDuration, MetricUnit.Milliseconds, Math.round(report.durationMs));
    }
    this.#published += report.published;
    this.#failed += report.failed;
    this.#deadLettered += report.deadLettered;
    this.#loadTimeouts += report.loadTimeouts;
    for (const event of report.publishedEvents) this.#lag.offer(event.lagMs);
    for (const event of report.failedEvents) {
      this.#failuresByType.set(event.eventType, (this.#failuresByType.get(event.eventType) ?? 0) + 1);
    }
    for (const [name, counts] of Object.entries(report.destinations ?? {})) {
      const window = this.#byDestination.get(name) ?? { published: 0, failed: 0 };
      window.published += counts.published;
      window.failed += counts.failed;
      this.#byDestination.set(name, window);
    }
    this.#flushIfDue();
  }

  /** A round that failed as a whole (the engine's onRoundFailed): the database unreachable, a statement timed out. */
  recordFailedRound(): void {
    this.#failedRounds++;
    this.#flushIfDue();
  }

  /** The engine's observer callbacks, bound to this recorder. */
  observer(): { onRound(report: RoundReport): void; onRoundFailed(): void } {
    return {
      onRound: (report) => this.recordRound(report),
      onRoundFailed: () => this.recordFailedRound(),
    };
  }

  /**
   * One invocation, observed: the heartbeat starts, `run` gets the engine's callbacks, and the end stores the last
   * window, with a stall when `run` throws (rethrown) or returns a `noProgress`.
   */
  async observe<T extends { failedRounds: number; noProgress?: unknown }>(
    run: (observer: ReturnType<RelayMetrics["observer"]>) => Promise<T>,
  ): Promise<T> {
    this.start();
    let result: T;
    try {
      result = await run(this.observer());
    } catch (error) {
      // A bad budget, a queue that cannot take the messages, the database unreachable at the start: a stall too.
      this.finish({ stalled: true });
      throw error;
    }
    this.finish({ failedRounds: result.failedRounds, stalled: result.noProgress !== undefined });
    return result;
  }

  /**
   * The invocation has begun: writes a window at once (its heartbeat) and then one every flush interval from a
   * timer, so a relay whose rounds all fail or hang still writes its heartbeat and its stall. `finish()` stops it.
   */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#publishWindow();
    this.#timer = setInterval(() => this.#publishWindow(), this.#flushIntervalMs);
    // Never what keeps a process alive (the CLI, a test): the invocation's own work does that.
    this.#timer.unref();
  }

  /**
   * End of the invocation: stores the last window for the handler's logMetrics middleware to publish. The
   * counters go in last, so the store is never empty when the middleware publishes (it warns if it is).
   * `stalled`: the invocation failed or made no progress, written as a RelayStalled of 1 whatever the window saw.
   */
  finish(summary?: { failedRounds?: number; stalled?: boolean }): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#storeWindow(summary?.stalled === true);
    // Per invocation: rounds that failed as a whole (their rows released, not lost). A stall hides here first.
    if (summary?.failedRounds !== undefined) {
      this.#metrics.addMetric(METRIC.failedRounds, MetricUnit.Count, summary.failedRounds);
    }
  }

  /** Without the timer (`start()` not called), a round that ends after the interval writes the window. */
  #flushIfDue(): void {
    if (this.#timer === undefined && this.#now() - this.#windowStart >= this.#flushIntervalMs) {
      this.#publishWindow();
    }
  }

  #publishWindow(): void {
    this.#storeWindow(false);
    if (this.#metrics.hasStoredMetrics()) this.#metrics.publishStoredMetrics();
  }

  #storeWindow(invocationFailed: boolean): void {
    for (const lagMs of this.#lag.take()) {
      this.#metrics.addMetric(METRIC.publishLag, MetricUnit.Milliseconds, lagMs);
    }
    // Metrics of one line share its dimensions, so the per-type figures are lines of their own.
    for (const [eventType, failures] of boundedByType(this.#failuresByType, this.#maxEventTypes)) {
      this.#metrics
        .singleMetric()
        .addDimension(EVENT_TYPE_DIMENSION, eventType)
        .addMetric(METRIC.publishFailures, MetricUnit.Count, failures);
    }
    // Unrouted events on the main line, under a name of their own: a wrong route table, not a failing destination,
    // though they also count as PublishFailures{destination=none}. Behind a route table only, zeros included.
    if (this.#byDestination.size > 0) {
      const unrouted = this.#byDestination.get(NO_ROUTE_DESTINATION)?.failed ?? 0;
      this.#metrics.addMetric(METRIC.unroutedEvents, MetricUnit.Count, unrouted);
    }
    // Lines of their own (a single metric writes one line per value: one metric per EMF event, far below its 100),
    // two per destination (a route table has at most MAX_ROUTES + 1 of them, plus `none`); zeros kept, so an alarm
    // on one destination sees 0 rather than missing data.
    for (const [name, counts] of this.#byDestination) {
      for (const [metric, value] of [
        [METRIC.eventsPublished, counts.published],
        [METRIC.publishFailures, counts.failed],
      ] as const) {
        this.#metrics
          .singleMetric()
          .addDimension(DESTINATION_DIMENSION, name)
          .addMetric(metric, MetricUnit.Count, value);
      }
      counts.published = 0;
      counts.failed = 0;
    }
    this.#metrics.addMetric(METRIC.eventsPublished, MetricUnit.Count, this.#published);
    this.#metrics.addMetric(METRIC.publishFailures, MetricUnit.Count, this.#failed);
    this.#metrics.addMetric(METRIC.eventsDeadLettered, MetricUnit.Count, this.#deadLettered);
    // Rows whose payload did not load in the load's budget (also among PublishFailures): slow, not malformed.
    this.#metrics.addMetric(METRIC.payloadLoadTimeouts, MetricUnit.Count, this.#loadTimeouts);
    this.#metrics.addMetric(METRIC.relayHeartbeat, MetricUnit.Count, 1);
    const unsettled = this.#failed - this.#deadLettered;
    if (this.#published > 0) this.#awaitingRetry = false;
    else if (unsettled > 0) this.#awaitingRetry = true;
    // An idle window while events this invocation failed to publish wait in backoff, nothing published since:
    // still stalled (those events are certainly pending), so a small backlog in backoff keeps the stall up.
    const stalled =
      stalledWindow({
        published: this.#published,
        deadLettered: this.#deadLettered,
        unsettled,
        failedRounds: this.#failedRounds,
      }) ?? (this.#awaitingRetry ? 1 : undefined);
    if (invocationFailed || stalled !== undefined) {
      this.#metrics.addMetric(METRIC.relayStalled, MetricUnit.Count, invocationFailed ? 1 : (stalled ?? 0));
    }
    this.#published = 0;
    this.#failed = 0;
    this.#deadLettered = 0;
    this.#failedRounds = 0;
    this.#loadTimeouts = 0;
    this.#failuresByType.clear();
    this.#windowStart = this.#now();
  }
}

/**
 * RelayStalled for one window: 1 when it published nothing although rounds failed as a whole or publishes failed
 * unsettled (not dead letters: those are settled, with an alarm of their own), the window-sized form of
 * relay/invocation.ts's noProgressError; 0 when it published or only settled; undefined when nothing happened
 * (an idle window says nothing about progress, and a minute's Minimum must not be pulled to 0 by an idle relay
 * beside a stalled one).
 */
export function stalledWindow(window: {
  published: number;
  deadLettered: number;
  unsettled: number;
  failedRounds: number;
}): 0 | 1 | undefined {
  if (window.published > 0) return 0;
  if (window.unsettled > 0 || window.failedRounds > 0) return 1;
  return window.deadLettered > 0 ? 0 : undefined;
}

/** The `max` entries with the highest counts (ties: the first seen), plus the rest summed under "other". */
function boundedByType(counts: Map<string, number>, max: number): [string, number][] {
  if (max === 0) return [];
  const sorted = [...counts].sort((a, b) => b[1] - a[1]);
  if (sorted.length <= max) return sorted;
  const rest = sorted.slice(max).reduce((sum, [, count]) => sum + count, 0);
  return [...sorted.slice(0, max), [OTHER_EVENT_TYPES, rest]];
}

/** Algorithm R: after n offers, each offered value is in the sample with probability capacity / n. */
export class Reservoir {
  readonly #capacity: number;
  readonly #random: () => number;
  #values: number[] = [];
  #seen = 0;

  constructor(capacity: number, random: () => number) {
    this.#capacity = capacity;
    this.#random = random;
  }

  offer(value: number): void {
    this.#seen++;
    if (this.#values.length < this.#capacity) {
      this.#values.push(value);
      return;
    }
    const slot = Math.floor(this.#random() * this.#seen);
    if (slot < this.#capacity) this.#values[slot] = value;
  }

  take(): number[] {
    const values = this.#values;
    this.#values = [];
    this.#seen = 0;
    return values;
  }
}
