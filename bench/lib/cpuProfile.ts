import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";

export interface ProfileShare {
  /** A package (`@smithy/core`), a Node internal (`node:_http_client`), a project file, or (garbage collector). */
  where: string;
  /** Self time per event, µs. */
  usPerEvent: number;
  /** Share of the thread's busy (non-idle) samples. */
  share: number;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}

/**
 * Samples this thread's CPU while `work` runs (V8's profiler through node:inspector, 0.5 ms interval) and
 * returns where its busy time went, by package, per event. Idle samples are dropped: they are waits for
 * Postgres and the endpoint, which the round profile measures instead. With BENCH_CPU_PROFILE=<file> the raw
 * profile is written there too, for Chrome DevTools or any .cpuprofile viewer (per function, call trees).
 */
export async function profileThread<T>(
  work: () => Promise<T>,
  events: (result: T) => number,
  top = 10,
): Promise<{ result: T; busyUsPerEvent: number; shares: ProfileShare[] }> {
  const session = new Session();
  session.connect();
  try {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 500 });
    await session.post("Profiler.start");
    const result = await work();
    const { profile } = await session.post("Profiler.stop");
    if (process.env.BENCH_CPU_PROFILE) writeFileSync(process.env.BENCH_CPU_PROFILE, JSON.stringify(profile));
    const nodes = new Map((profile.nodes as ProfileNode[]).map((node) => [node.id, node]));
    const byWhere = new Map<string, number>();
    profile.samples?.forEach((id, index) => {
      const node = nodes.get(id);
      const where = node === undefined ? "(unknown)" : locate(node);
      // Waiting, V8's own bookkeeping, and the profiler's session itself are not the relay's work.
      if (where === "(idle)" || where === "(program)" || where === "node:inspector") return;
      byWhere.set(where, (byWhere.get(where) ?? 0) + (profile.timeDeltas?.[index] ?? 0));
    });
    const busyUs = [...byWhere.values()].reduce((sum, us) => sum + us, 0);
    const count = events(result);
    const shares = [...byWhere]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([where, us]) => ({ where, usPerEvent: us / count, share: us / busyUs }));
    return { result, busyUsPerEvent: busyUs / count, shares };
  } finally {
    session.disconnect();
  }
}

function locate(node: ProfileNode): string {
  const { url, functionName } = node.callFrame;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg !== undefined) return pkg;
  const own = /\/(functions|bench|local)\/(.+)$/.exec(url);
  if (own !== null) return `${own[1]}/${own[2]}`;
  if (url.startsWith("node:")) return url;
  if (url !== "") return url;
  // (garbage collector), (idle), (program) come with their parentheses; the rest are C++ builtins (writev, Hash).
  return functionName.startsWith("(") ? functionName : `native ${functionName || "code"}`;
}
