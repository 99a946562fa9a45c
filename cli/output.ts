/** Results go to stdout (so `--json` output pipes cleanly); diagnostics and logs go to stderr. */
export function print(text = ""): void {
  process.stdout.write(`${text}\n`);
}

export function printError(text: string): void {
  process.stderr.write(`${text}\n`);
}

export function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

export interface Column<T> {
  header: string;
  value(row: T): string;
  /** Numbers read best right-aligned. */
  align?: "left" | "right";
  /** Longer values are cut with an ellipsis, so one long error message cannot wreck the table. */
  maxWidth?: number;
}

/** A plain-text table: a header row, then one line per row, columns padded to their widest value. */
export function formatTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((row) => columns.map((column) => truncate(column.value(row), column.maxWidth)));
  const widths = columns.map((column, index) =>
    Math.max(column.header.length, ...cells.map((line) => (line[index] ?? "").length)),
  );
  const render = (line: readonly string[]) =>
    line
      .map((cell, index) => {
        const width = widths[index] ?? 0;
        return columns[index]?.align === "right" ? cell.padStart(width) : cell.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  return [render(columns.map((column) => column.header)), ...cells.map(render)].join("\n");
}

function truncate(text: string, maxWidth: number | undefined): string {
  const oneLine = escapeControl(text.replace(/\s+/g, " "));
  if (maxWidth === undefined || oneLine.length <= maxWidth) return oneLine;
  return `${oneLine.slice(0, maxWidth - 1)}…`;
}

/**
 * C0 and C1 control characters (ESC starts terminal escape sequences), and the bidirectional overrides that
 * reorder what a terminal shows. Whitespace is collapsed before, so a tab or newline is a space.
 */
const CONTROL = /[\p{Cc}\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/**
 * Database strings in human output are shown, never interpreted: a row written by hand can hold an escape
 * sequence that would recolour, rewrite or hide lines of the operator's terminal. Each control character is
 * printed as a visible `\u` escape; JSON output carries the exact text (JSON escapes controls itself).
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** 0.4 s, 42 s, 12 min, 3.5 h, 2.1 d: an age at a glance. */
export function formatAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7_200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${(seconds / 3_600).toFixed(1)} h`;
  return `${(seconds / 86_400).toFixed(1)} d`;
}

export function plural(count: number, singular: string, pluralForm = `${singular}s`): string {
  return `${count} ${count === 1 ? singular : pluralForm}`;
}
