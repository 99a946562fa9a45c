import { describe, expect, it } from "vitest";
import type { DatabaseView } from "../../bench/lib/databaseWatch.ts";
import type { RoundTrace } from "../../bench/lib/roundTrace.ts";
import { stallReport } from "../../bench/lib/stallReport.ts";
import type { ThreadPauses } from "../../bench/lib/threadPauses.ts";

const T0 = 1_800_000_000_000;

function round(startMs: number, phases: Partial<RoundTrace>): RoundTrace {
  const ms = {
    connectMs: 0,
    txMs: 0.2,
    claimMs: 2,
    loadMs: 1,
    publishMs: 22,
    recordMs: 2,
    commitMs: 0.3,
    ...phases,
  };
  const total = ms.connectMs + ms.txMs + ms.claimMs + ms.loadMs + ms.publishMs + ms.recordMs + ms.commitMs;
  return { startedAt: T0 + startMs, endedAt: T0 + startMs + total, rows: 250, ...ms };
}

const quiet: ThreadPauses = {
  delayP99Ms: 12,
  delayMaxMs: 20,
  stalls: [],
  gc: [],
  gcCount: 10,
  gcTotalMs: 15,
  heapUsedMiB: { start: 40, end: 60 },
};
const noDatabase: DatabaseView = { sampleEveryMs: 100, samples: 80, conditions: [], counters: {}, plans: [] };

describe("bench stall report: names what overlaps a stall", () => {
  it("groups the events that waited behind a 1.2 s endpoint GC into one spike and names the GC first", () => {
    const rounds = [
      ...Array.from({ length: 100 }, (_, i) => round(i * 30, {})),
      // The round in flight when the endpoint's thread stopped: its publish took the whole pause.
      round(3_000, { publishMs: 1_230 }),
      ...Array.from({ length: 100 }, (_, i) => round(4_300 + i * 30, {})),
    ];
    const endpoint: ThreadPauses = {
      ...quiet,
      gc: [{ at: T0 + 3_010, ms: 1_200, kind: "major" }],
      stalls: [{ at: T0 + 4_215, lateMs: 1_190 }],
    };
    // 3 events per ms: normally published 40 ms after commit; those committed during the pause wait for its end.
    const events = Array.from({ length: 21_000 }, (_, i) => {
      const committedAt = T0 + i / 3;
      const inPause = committedAt >= T0 + 3_000 && committedAt < T0 + 4_230;
      return { committedAt, publishedAt: inPause ? T0 + 4_240 : committedAt + 40 };
    });

    const report = stallReport({
      startedAt: T0,
      rounds,
      relay: quiet,
      endpoint,
      database: {
        ...noDatabase,
        conditions: [
          { from: T0 + 6_000, to: T0 + 6_300, what: "autovacuum worker: VACUUM public.outbox_events" },
        ],
      },
      events,
    });

    expect(report.spikes).toHaveLength(1);
    const [spike] = report.spikes;
    expect(spike?.maxMs).toBeGreaterThan(1_200);
    expect(spike?.fromMs).toBeGreaterThanOrEqual(3_000);
    expect(spike?.toMs).toBeLessThan(4_230);
    expect(spike?.cause).toMatch(/^slowest round 1236 ms \(publish 1230 ms\)/);
    expect(spike?.cause).toContain("SQS endpoint thread major GC 1200 ms");
    // The vacuum came later: it is not blamed.
    expect(spike?.cause).not.toContain("VACUUM");
    expect(report.slowestRounds[0]).toMatchObject({ atMs: 3_000, rows: 250 });
    expect(report.slowestRounds[0]?.cause).toMatch(
      /^publish 1230 ms; SQS endpoint thread (major GC|blocked)/,
    );
    expect(report.phases.publish?.max).toBe(1_230);
  });

  it("reports no spike when every event is published within the threshold", () => {
    const events = Array.from({ length: 3_000 }, (_, i) => ({
      committedAt: T0 + i,
      publishedAt: T0 + i + 60,
    }));
    const report = stallReport({
      startedAt: T0,
      rounds: [round(0, {})],
      relay: quiet,
      endpoint: quiet,
      database: noDatabase,
      events,
    });
    expect(report.spikes).toEqual([]);
  });
});
