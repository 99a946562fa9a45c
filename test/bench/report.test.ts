import { describe, expect, it } from "vitest";
import type { LatencyRun } from "../../bench/measures/latency.ts";
import {
  type BenchResults,
  destinationTable,
  markdownReport,
  quotaTable,
  summaryTable,
} from "../../bench/report.ts";

const machine = { cpus: 2, cpuModel: "test", node: "v24", postgres: "17", postgresSource: "test" };
const base: BenchResults = {
  startedAt: "2026-12-01T00:00:00.000Z",
  durationSeconds: 1,
  machine,
  postgresSettings: {},
  backlog: { events: 1, aggregates: 1 },
};

function latencyRun(p99: number, max: number): LatencyRun {
  return { events: 24_000, p50: 40, p95: 60, p99, max, commitP50: 0.5, commitP99: 1 };
}

/** The row of the summary table whose first cell starts with `label`, as its cells. */
function row(table: string, label: string): string[] {
  const line = table.split("\n").find((l) => l.startsWith(`| ${label}`));
  if (line === undefined) throw new Error(`no row ${label} in\n${table}`);
  return line.slice(2, -2).split(" | ");
}

/** The summary of a bench run that measured only the latency runs (3,000 events/s for 8 s, SQS +20 ms). */
function latencyTable(polling: ReturnType<typeof latencyRun>[], notify: ReturnType<typeof latencyRun>[]) {
  return summaryTable({
    ...base,
    latency: { eventsPerSecond: 3_000, durationMs: 8_000, sqsLatencyMs: 20, polling, notify },
  });
}

describe("bench summary: a standing target must hold in every run", () => {
  it("marks the latency target missed when one run's p99 misses, though the median passes, and lists every run", () => {
    const table = latencyTable(
      [latencyRun(91, 178), latencyRun(92, 190), latencyRun(148, 247)],
      [latencyRun(80, 150), latencyRun(85, 160), latencyRun(90, 170)],
    );
    const polling = row(table, "5. commit→publish latency, dwell, polling");
    expect(polling.join(" | ")).toContain("p99 runs: 91, 92, 148 ms");
    expect(polling.at(-1)).toBe("**MISS** (1 of 3 runs)");
    expect(row(table, "5. commit→publish latency, dwell, LISTEN/NOTIFY").at(-1)).toBe("pass");
  });

  it("marks a run with a second-long stall missed even when every p99 is within the target", () => {
    const table = latencyTable(
      [latencyRun(70, 200), latencyRun(72, 210), latencyRun(75, 220)],
      [latencyRun(70, 200), latencyRun(72, 1_896), latencyRun(75, 220)],
    );
    expect(row(table, "5. commit→publish latency, dwell, polling").at(-1)).toBe("pass");
    const notify = row(table, "5. commit→publish latency, dwell, LISTEN/NOTIFY");
    expect(notify.join(" | ")).toContain("max runs: 200, 1,896, 220 ms");
    expect(notify.at(-1)).toBe("**MISS** (1 of 3 runs)");
  });

  it("judges the 20 ms throughput target on each run, not on the median", () => {
    const cpu = { relay: 40, endpoint: 20, postgres: 30 };
    const table = summaryTable({
      ...base,
      relay20ms: [
        {
          tuning: { batchSize: 250, concurrency: 25 },
          eventsPerSecond: { median: 10_100, min: 9_299, max: 10_300, runs: [10_100, 9_299, 10_300] },
          msPerRound: { claim: 1, load: 1, publish: 20, record: 1, tx: 1 },
          rounds: 80,
          cpuPer1k: cpu,
          machineBusy: 0.7,
          cpuRuns: [cpu, cpu, cpu],
        },
      ],
    });
    const default20 = row(table, "3. relay → SQS + 20 ms/request, default");
    expect(default20.join(" | ")).toContain("runs: 10,100, 9,299, 10,300 ev/s");
    expect(default20.at(-1)).toBe("**MISS** (1 of 3 runs)");
  });
});

describe("bench report: the CPU-share and destination tables", () => {
  it("renders one row per memory size, ascending, no quota last, with every run's events/s and CPU (process and relay thread)", () => {
    const run = (memoryMb: number | null, eventsPerSecond: number) => ({
      memoryMb,
      vcpu: memoryMb === null ? null : memoryMb / 1_769,
      sqsLatencyMs: 20,
      eventsPerSecond,
      cpuUsPerEvent: 120,
      threadUsPerEvent: 90,
    });
    const table = quotaTable([run(1_769, 6_481), run(null, 5_994), run(448, 1_902), run(448, 2_031)]);
    const lines = table.split("\n").slice(2);
    expect(lines).toHaveLength(3);
    expect(row(table, "448 MB (0.25)")).toEqual([
      "448 MB (0.25)",
      "20 ms",
      "1,902 / 2,031",
      "120 / 120",
      "90 / 90",
    ]);
    expect(lines[1]).toContain("1,769 MB (1)");
    expect(lines[2]).toContain("no quota");
    expect(markdownReport({ ...base, relayQuota: [run(448, 1_902)] })).toContain(
      "### One relay invocation on a Lambda's CPU share",
    );
  });

  it("names every destination kind in the destinations table", () => {
    const cpuPer1k = { relay: 80, endpoint: 20, postgres: 30 };
    const kinds = ["sqs-fifo", "sqs", "sns-fifo", "sns", "kinesis", "eventbridge"] as const;
    const table = destinationTable(
      kinds.map((destination) => ({
        destination,
        latencyMs: 20,
        eventsPerSecond: { median: 5_000, min: 4_000, max: 6_000, runs: [4_000, 6_000] },
        cpuPer1k,
      })),
    );
    for (const label of ["SQS FIFO", "SQS standard", "SNS FIFO", "SNS standard", "Kinesis", "EventBridge"]) {
      expect(row(table, label)).toEqual([
        expect.stringContaining(label),
        "20 ms",
        "5,000 (4,000–6,000)",
        "80",
      ]);
    }
  });
});
