export type Cell = string | number;

/** A GitHub markdown table; numbers get thousands separators. */
export function markdownTable(header: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = (cell: Cell) => (typeof cell === "number" ? formatNumber(cell) : cell);
  const lines = [
    `| ${header.join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
    ...rows.map((row) => `| ${row.map(text).join(" | ")} |`),
  ];
  return lines.join("\n");
}

export function formatNumber(value: number, digits?: number): string {
  const fraction = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2);
  return value.toLocaleString("en-US", { maximumFractionDigits: fraction, minimumFractionDigits: 0 });
}

/** `pass` / `MISS` beside a number and its target. */
export function verdict(ok: boolean): string {
  return ok ? "pass" : "**MISS**";
}

/**
 * The verdict of a target that must hold in every run: `pass` only if each run met it, else `**MISS**` with how
 * many runs missed. A median hides the one run in three that stalled, and that run is what a user sees.
 */
export function verdictOfRuns<T>(runs: readonly T[], met: (run: T) => boolean): string {
  if (runs.length === 0) return "–";
  const missed = runs.filter((run) => !met(run)).length;
  return missed === 0 ? "pass" : `**MISS** (${missed} of ${runs.length} runs)`;
}

/** Every run's figure, in run order: `91, 148, 1,535`. */
export function listRuns(values: readonly number[], digits?: number): string {
  return values.map((value) => formatNumber(value, digits)).join(", ");
}
