import { Metrics } from "@aws-lambda-powertools/metrics";
import { Match, Template } from "aws-cdk-lib/assertions";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { publishOutcomeCounts } from "../../functions/shared/consumer/outcomeMetrics.ts";
import { routeTableFromEnv } from "../../functions/shared/destinations/routing/table.ts";
import {
  RelayMetrics,
  recordOutboxSnapshot,
  recordPurgeSummary,
} from "../../functions/shared/observe/metrics.ts";
import { examplePropsFromContext, OutboxExampleStack } from "../../infra/exampleStack.ts";
import { routedApp } from "../support/routedApp.ts";
import { deployed, newApp, outboxStack, type Resource, resources } from "../support/template.ts";
import { read } from "./markdown.ts";

/**
 * docs/cost.md's monitoring figures, computed from the construct instead of by hand (issue 40, item 11): the alarms
 * and the metrics each reads, from the synthesized template; the custom metrics, from what the relay's, the
 * purge's and the consumer's own emitters write in steady state for the destinations the template's route table
 * names (every distinct metric name and dimension values is a billed custom metric). And the example stack's
 * database floor from its cluster's minimum capacity.
 */

/** Alarms, and the metrics they read: one for a metric alarm, each `MetricStat` of a math alarm. */
function alarmFigures(template: Template) {
  const alarms = resources(template, "AWS::CloudWatch::Alarm");
  const metrics = alarms.reduce((sum, [, alarm]) => {
    const properties = alarm.Properties ?? {};
    if (properties.MetricName !== undefined) return sum + 1;
    const queries = (properties.Metrics ?? []) as { MetricStat?: unknown }[];
    return sum + queries.filter((query) => query.MetricStat !== undefined).length;
  }, 0);
  return { alarms: alarms.length, metrics };
}

/** The environment of the function that has `variable`, as CloudFormation resolves it. */
function functionEnvironment(template: Template, variable: string): Record<string, string> {
  const [found] = Object.values(
    template.findResources("AWS::Lambda::Function", {
      Properties: { Environment: { Variables: Match.objectLike({ [variable]: Match.anyValue() }) } },
    }),
  ) as { Properties: { Environment: { Variables: Record<string, unknown> } } }[];
  if (found === undefined) throw new Error(`no function with ${variable}`);
  return Object.fromEntries(
    Object.entries(found.Properties.Environment.Variables).map(([name, value]) => [
      name,
      String(deployed(value)),
    ]),
  );
}

let written = "";
beforeEach(() => {
  written = "";
  vi.spyOn(process.stdout, "write").mockImplementation(((chunk: unknown) => {
    written += String(chunk);
    return true;
  }) as typeof process.stdout.write);
});
afterEach(() => vi.restoreAllMocks());

/** Every distinct (namespace, metric, dimension values) the EMF lines written so far define. */
function customMetrics(): Set<string> {
  const found = new Set<string>();
  for (const line of written.split("\n").filter((text) => text.startsWith("{") && text.includes('"_aws"'))) {
    const doc = JSON.parse(line);
    for (const directive of doc._aws.CloudWatchMetrics as {
      Namespace: string;
      Dimensions: string[][];
      Metrics: { Name: string }[];
    }[]) {
      for (const set of directive.Dimensions) {
        const dimensions = set.map((name) => `${name}=${doc[name]}`).join(",");
        for (const { Name } of directive.Metrics) found.add(`${directive.Namespace} ${Name} ${dimensions}`);
      }
    }
  }
  return found;
}

/**
 * What the construct's functions write in steady state, every destination seen: the relay's windows, the purge's
 * snapshot and purge runs, and the consumer's outcome counts (each distinct name and dimensions once). Failures
 * per event type and a failed snapshot are left out: they appear only while something fails.
 */
function steadyCustomMetrics(template: Template, withConsumer: boolean): number {
  const purgeEnvironment = functionEnvironment(template, "PURGE_RETENTION_HOURS");
  const lanes = routeTableFromEnv(purgeEnvironment)?.lanes.map((lane) => lane.name) ?? [];
  const relayMetrics = new Metrics({ namespace: "OutboxRelay", serviceName: "shop-relay" });
  const relay = new RelayMetrics(relayMetrics);
  relay.recordRound({
    claimed: lanes.length + 1,
    published: lanes.length + 1,
    failed: 0,
    deadLettered: 0,
    held: 0,
    loadTimeouts: 0,
    durationMs: 12,
    publishedEvents: [{ eventType: "order.created", lagMs: 40 }],
    failedEvents: [],
    ...(lanes.length === 0
      ? {}
      : { destinations: Object.fromEntries(lanes.map((name) => [name, { published: 1, failed: 0 }])) }),
  });
  relay.finish({ failedRounds: 0 });
  relayMetrics.publishStoredMetrics();
  const purge = new Metrics({ namespace: "OutboxRelay", serviceName: "shop-purge" });
  recordOutboxSnapshot(purge, {
    pending: 0,
    oldestPendingAgeSeconds: 0,
    deadLetters: 0,
    blockedAggregates: 0,
    // Per event type: what `outbox status` prints; no metric.
    byEventType: [],
    ...(lanes.length === 0
      ? {}
      : {
          byDestination: lanes.map((destination) => ({
            destination,
            pending: 0,
            oldestPendingAgeSeconds: 0,
          })),
          capped: false,
        }),
  });
  purge.publishStoredMetrics();
  recordPurgeSummary(purge, {
    deletedRows: 0,
    deletedDeadLetters: 0,
    batches: 1,
    durationMs: 5,
    stoppedBy: "drained",
  });
  purge.publishStoredMetrics();
  if (withConsumer) {
    const consumer = new Metrics({ namespace: "OutboxConsumer", serviceName: "shop-consumer" });
    const quiet = { info() {}, warn() {}, error() {} } as unknown as Parameters<
      typeof publishOutcomeCounts
    >[2];
    publishOutcomeCounts(
      consumer,
      { processed: 1, duplicate: 0, stale: 0, ignored: 0, failed: 0, skipped: 0 },
      quiet,
    );
  }
  return customMetrics().size;
}

/** cost.md's prose, line breaks as spaces. */
const COST = read("docs/cost.md").replace(/\s*\n\s*/g, " ");
const CLOUDWATCH = { alarmMetric: 0.1, customMetric: 0.3, dashboard: 3 };

describe("docs/cost.md's monitoring figures, from the construct", () => {
  // Synthesized while the file is collected, outside any test's timeout (a loaded machine takes a minute).
  const routed = routedApp().template;
  const plain = outboxStack().template;
  const exampleApp = newApp();
  const example = Template.fromStack(
    new OutboxExampleStack(exampleApp, "Example", examplePropsFromContext(exampleApp.node)),
  );

  it("prices a routed app's alarms and custom metrics as the construct makes them", () => {
    const template = routed;
    const { alarms, metrics } = alarmFigures(template);
    const custom = steadyCustomMetrics(template, true);
    const stated = COST.match(
      /routed app[^|]*?\*\*(\d+) alarms \((\d+) alarm metrics\), (\d+) custom metrics\*\*[^|]*?= \*\*\$([\d.]+)\*\*/,
    );
    expect(
      stated,
      "cost.md states the routed app's alarms, alarm metrics, custom metrics and price",
    ).not.toBeNull();
    const [, statedAlarms, statedMetrics, statedCustom, statedPrice] = stated as RegExpMatchArray;
    expect({ alarms, metrics, custom }).toEqual({
      alarms: Number(statedAlarms),
      metrics: Number(statedMetrics),
      custom: Number(statedCustom),
    });
    const price = metrics * CLOUDWATCH.alarmMetric + custom * CLOUDWATCH.customMetric + CLOUDWATCH.dashboard;
    expect(Number(statedPrice)).toBeCloseTo(price, 1);
  });

  it("prices the default outbox's alarms and custom metrics as the construct makes them", () => {
    const template = plain;
    const { alarms, metrics } = alarmFigures(template);
    const custom = steadyCustomMetrics(template, false);
    const stated = COST.match(
      /CloudWatch: (\d+) alarms \((\d+) alarm metrics\), (\d+) EMF metrics, 1 dashboard/,
    );
    expect(stated).not.toBeNull();
    const [, statedAlarms, statedMetrics, statedCustom] = stated as RegExpMatchArray;
    expect({ alarms, metrics, custom }).toEqual({
      alarms: Number(statedAlarms),
      metrics: Number(statedMetrics),
      custom: Number(statedCustom),
    });
  });

  it("states the example stack's database floor at its cluster's minimum capacity", () => {
    const [[, cluster]] = resources(example, "AWS::RDS::DBCluster") as [[string, Resource]];
    const scaling = cluster.Properties?.ServerlessV2ScalingConfiguration as { MinCapacity: number };
    const minimum = scaling.MinCapacity;
    const stated = COST.match(/\*\*([\d.]+) ACU\*\* x 730 h x \$([\d.]+) per ACU-hour = \*\*\$([\d.]+)\*\*/);
    expect(stated, "cost.md states the example's Aurora floor").not.toBeNull();
    const [, acu, rate, monthly] = stated as RegExpMatchArray;
    expect(Number(acu)).toBe(minimum);
    expect(Number(monthly)).toBeCloseTo(Number(acu) * 730 * Number(rate), 1);
  });
});
