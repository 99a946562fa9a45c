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
