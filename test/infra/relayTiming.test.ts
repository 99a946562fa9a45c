import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { RelayQuotaRun } from "../../bench/measures/relayQuota.ts";
import {
  DEFAULT_TARGET_EVENTS_PER_SECOND,
  defaultRelayMemory,
  LAMBDA_MB_PER_VCPU,
  MIB,
  RELAY_EVENTS_PER_VCPU,
  relayMemory,
  throughputMemoryMb,
} from "../../infra/relayTiming.ts";

describe("relay memory sized for throughput as well as payloads", () => {
  it("sizes the default relay for 1,000 events/s (384 MB), so the payloads' 448 MB decide", () => {
    expect(DEFAULT_TARGET_EVENTS_PER_SECOND).toBe(1_000);
    expect(defaultRelayMemory()).toEqual({
      roundBytes: 16 * MIB,
      payloadMb: 448,
      throughputMb: 384,
      memoryMb: 448,
    });
    // The share reaches the target at the measured rate per vCPU.
    expect((448 / LAMBDA_MB_PER_VCPU) * RELAY_EVENTS_PER_VCPU).toBeGreaterThanOrEqual(1_000);
    // 3,000 events/s, the old default, is still one setting away.
    expect(throughputMemoryMb(3_000)).toBe(1_024);
  });

  it("takes its figures from the committed quota runs relayTiming.ts cites: the default memory published its target, and the rate per vCPU is below what the share-bound sizes measured", () => {
    const runs = QUOTA_RESULTS.flatMap(
      (file) =>
        (
          JSON.parse(readFileSync(new URL(`../../bench/results/${file}`, import.meta.url), "utf8")) as {
            relayQuota: RelayQuotaRun[];
          }
        ).relayQuota,
    );
    const atDefault = runs.filter((run) => run.memoryMb === defaultRelayMemory().memoryMb);
    expect(atDefault.length).toBeGreaterThanOrEqual(4);
    expect(median(atDefault.map((run) => run.eventsPerSecond))).toBeGreaterThanOrEqual(
      DEFAULT_TARGET_EVENTS_PER_SECOND,
    );
    // Where the share is the limit (up to 1,024 MB), nine runs in ten beat the sizing rate.
    const perVcpu = runs
      .filter((run) => run.memoryMb !== null && run.memoryMb <= 1_024)
      .map((run) => run.eventsPerSecond / (run.vcpu ?? 1));
    expect(quantile(perVcpu, 0.1)).toBeGreaterThanOrEqual(RELAY_EVENTS_PER_VCPU);
  });

  it("rounds the share up to 64 MB, never below Lambda's 128 MB", () => {
    expect(throughputMemoryMb(1)).toBe(128);
    expect(throughputMemoryMb(1_000)).toBe(384); // 322 MB
    expect(throughputMemoryMb(6_000)).toBe(1_984); // 1,930 MB
  });

  it("lets payloads decide when they need more than the throughput target", () => {
    const memory = relayMemory({
      batchMaxBytes: 64 * MIB,
      parallelRounds: 4,
      batchSize: 250,
      maxMessageBytes: MIB,
      targetEventsPerSecond: 1_000,
    });
    expect(memory).toMatchObject({ payloadMb: 1_024, throughputMb: 384, memoryMb: 1_024 });
    // The claim check's one 64 MiB payload past the budget: 448 + 6 x 64 = 832 MB, the large payloads' own term.
    const defaults = { batchMaxBytes: 16 * MIB, parallelRounds: 4, batchSize: 250, maxMessageBytes: MIB };
    expect(relayMemory({ ...defaults, maxPayloadBytes: 64 * MIB })).toMatchObject({
      payloadMb: 832,
      memoryMb: 832,
    });
  });

  it("refuses a target one invocation cannot reach, pointing at more relay targets", () => {
    expect(() => throughputMemoryMb(10_000)).toThrow(
      /targetEventsPerSecond 10000 is over the 6000 events\/s one relay invocation reaches.*more relay targets \(`relays`\)/,
    );
    expect(() => throughputMemoryMb(0)).toThrow(/must be an integer from 1 to 6000, got 0/);
    expect(() => throughputMemoryMb(2.5)).toThrow(/must be an integer from 1 to 6000, got 2.5/);
  });
});

/** The quota runs infra/relayTiming.ts cites for RELAY_EVENTS_PER_VCPU and the default memory. */
const QUOTA_RESULTS = [
  "2026-12-02T10-47-08.json",
  "2026-12-02T10-49-33.json",
  "2026-12-02T10-50-44.json",
  "2026-12-02T11-00-53.json",
  "2026-12-02T11-04-28.json",
  "2026-12-02T11-06-38.json",
  "2026-12-02T11-09-10.json",
  "2026-12-02T11-21-09.json",
];

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) * q)] ?? Number.NaN;
}

const median = (values: number[]) => quantile(values, 0.5);
