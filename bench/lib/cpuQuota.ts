import { mkdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LAMBDA_MB_PER_VCPU } from "../../infra/relayTiming.ts";

/** CFS accounting period, µs: 100 ms, the kernel's default and what a quota is a share of. */
export const CFS_PERIOD_US = 100_000;

/** The cgroup v1 `cpu` controller's mount point on these machines (`mount | grep cgroup`). */
const CPU_CONTROLLER = "/sys/fs/cgroup/cpu";

let groups = 0;

/** The vCPU share Lambda gives a function of `memoryMb` (one vCPU at 1,769 MB; infra/relayTiming.ts cites it). */
export const vcpuShare = (memoryMb: number): number => memoryMb / LAMBDA_MB_PER_VCPU;

/** cpu.cfs_quota_us for `memoryMb`'s share of one CPU per CFS_PERIOD_US (at least the kernel's 1 ms minimum). */
export const quotaUs = (memoryMb: number): number =>
  Math.max(1_000, Math.round(CFS_PERIOD_US * vcpuShare(memoryMb)));

export interface CpuQuotaGroup {
  /** The group's directory, e.g. /sys/fs/cgroup/cpu/outbox-bench-123-1. */
  path: string;
  /** Moves a process (all its threads, and what it starts later) into the group. */
  add(pid: number): void;
  /** Removes the group; its processes must have exited (the kernel refuses to remove a group in use). */
  remove(): void;
}

/**
 * A child group of the cgroup v1 `cpu` controller limiting its processes to `memoryMb`'s Lambda share: at most
 * cfs_quota_us of CPU time per cfs_period_us, summed over all their threads (kernel docs,
 * "CFS Bandwidth Control", scheduler/sched-bwc). The mechanism a Lambda's share is enforced with is not
 * documented, but a quota per period is the one that throttles a busy thread the way an under-sized function is:
 * it runs at full speed, then waits for the next period. Throws, naming the file, when the controller is absent
 * or not writable (not root, a read-only /sys): a bench that quietly ran without the quota would report the
 * machine's speed as Lambda's.
 */
export function cpuQuotaGroup(memoryMb: number, controller = CPU_CONTROLLER): CpuQuotaGroup {
  const path = join(controller, `outbox-bench-${process.pid}-${++groups}`);
  const write = (file: string, value: number) => {
    try {
      writeFileSync(join(path, file), String(value));
    } catch (error) {
      throw new Error(
        `cannot write ${join(path, file)} (${(error as Error).message}): the CPU quota needs the cgroup v1 cpu ` +
          `controller at ${controller}, writable (run as root)`,
        { cause: error },
      );
    }
  };
  try {
    mkdirSync(path);
  } catch (error) {
    throw new Error(
      `cannot create the cgroup ${path} (${(error as Error).message}): the CPU quota needs the cgroup v1 cpu ` +
        `controller mounted at ${controller} and writable (run as root)`,
      { cause: error },
    );
  }
  write("cpu.cfs_period_us", CFS_PERIOD_US);
  write("cpu.cfs_quota_us", quotaUs(memoryMb));
  return {
    path,
    add: (pid) => write("cgroup.procs", pid),
    remove: () => rmdirSync(path),
  };
}
