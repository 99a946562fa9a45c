import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cpuQuotaGroup, quotaUs, vcpuShare } from "../../bench/lib/cpuQuota.ts";

describe("bench CPU quota: a Lambda memory size's CPU share as a cgroup v1 cpu group", () => {
  it("gives a memory size its share of a 100 ms period: one vCPU at 1,769 MB", () => {
    expect(vcpuShare(1_769)).toBe(1);
    expect(quotaUs(1_769)).toBe(100_000);
    expect(quotaUs(448)).toBe(25_325);
    expect(quotaUs(3_538)).toBe(200_000);
  });

  it("writes the period and quota, and moves a process into the group", async () => {
    const group = cpuQuotaGroup(448);
    const child = spawn(process.execPath, ["-e", "process.stdin.resume()"], {
      stdio: ["pipe", "ignore", "ignore"],
    });
    try {
      expect(readFileSync(join(group.path, "cpu.cfs_period_us"), "utf8").trim()).toBe("100000");
      expect(readFileSync(join(group.path, "cpu.cfs_quota_us"), "utf8").trim()).toBe("25325");
      group.add(child.pid as number);
      expect(readFileSync(join(group.path, "cgroup.procs"), "utf8").split("\n")).toContain(String(child.pid));
    } finally {
      child.stdin.end();
      await once(child, "exit");
      group.remove();
    }
  });

  it("fails naming the controller when it cannot make the group, instead of running without a quota", () => {
    expect(() => cpuQuotaGroup(448, "/nonexistent/cgroup/cpu")).toThrow(
      /cannot create the cgroup \/nonexistent\/cgroup\/cpu\/outbox-bench-\d+-\d+ \(ENOENT.*the CPU quota needs the cgroup v1 cpu controller mounted at \/nonexistent\/cgroup\/cpu and writable/,
    );
  });
});
