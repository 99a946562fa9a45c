/**
 * The live view of `npm start`: a small block redrawn in place once a second on a terminal, or one plain line
 * every few seconds when stdout is a pipe or a file (CI logs, `| tee`), plus chaos events as they happen.
 */
export interface LiveFigures {
  elapsedSeconds: number;
  durationSeconds: number | null;
  written: number;
  writtenPerSecond: number;
  pending: number;
  published: number;
  publishedPerSecond: number;
  lagP50Ms: number | null;
  lagP99Ms: number | null;
  consumed: number;
  endToEndP50Ms: number | null;
  endToEndP99Ms: number | null;
  duplicatesSuppressed: number;
  orderViolations: number;
  /** Unordered: events that arrived after a later one of their order (information, not a failure). */
  lateArrivals?: number;
  /**
   * The relay publishes where order is not kept (a bus, a standard queue or topic): order is reported as
   * information, not as a violation.
   */
  unordered?: boolean;
  deadLetters: number;
  relay: { pid: number | undefined; starts: number; warnings: number };
  phase: string;
}

const PLAIN_EVERY_SECONDS = 5;
/** When the output reports no width (not a terminal), the width lines are folded to. */
const DEFAULT_COLUMNS = 80;

/** Where the view is drawn: process.stdout, or a test's stand-in with a chosen width. */
export interface DashboardOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export class Dashboard {
  readonly #tty: boolean;
  readonly #out: DashboardOutput;
  readonly #header: string;
  readonly #events: string[] = [];
  #drawnRows = 0;
  #lastPlain = Number.NEGATIVE_INFINITY;

  constructor(header: string, out: DashboardOutput = process.stdout) {
    this.#out = out;
    this.#tty = out.isTTY === true;
    this.#header = header;
    if (this.#tty) out.write("\x1b[?25l"); // hide the cursor while redrawing
  }

  /** A notable moment (chaos, restarts): kept in the view on a terminal, printed at once otherwise. */
  event(elapsedSeconds: number, text: string): void {
    const line = `${elapsedSeconds.toFixed(1).padStart(6)} s  ${text}`;
    this.#events.push(line);
    if (!this.#tty) this.#out.write(`  ${line}\n`);
  }

  update(figures: LiveFigures): void {
    if (!this.#tty) {
      if (figures.elapsedSeconds - this.#lastPlain < PLAIN_EVERY_SECONDS) return;
      this.#lastPlain = figures.elapsedSeconds;
      this.#out.write(`${plainLine(figures)}\n`);
      return;
    }
    const lines = [this.#header, ...block(figures)];
    if (this.#events.length > 0) lines.push("  events", ...this.#events.slice(-8).map((line) => `  ${line}`));
    // The terminal wraps a line wider than itself onto more rows than we would count, and the next rewind would
    // then stop short of the top: the header ends up repeated down the screen. Fold the lines ourselves, so
    // every row we write is one row on screen, and rewind exactly that many (read the width on every frame:
    // the window may have been resized).
    const rows = lines.flatMap((line) => fold(line, this.#out.columns ?? DEFAULT_COLUMNS));
    const rewind = this.#drawnRows > 0 ? `\x1b[${this.#drawnRows}F\x1b[J` : "";
    this.#out.write(`${rewind}${rows.join("\n")}\n`);
    this.#drawnRows = rows.length;
  }

  /** Leaves the last block on screen and gives the cursor back. */
  close(): void {
    if (this.#tty) this.#out.write("\x1b[?25h");
  }
}

/**
 * Splits a line into rows of at most `columns - 1` characters. One short of the width: a row that fills the
 * last column leaves some terminals in their pending-wrap state, where the newline that follows can count
 * twice. Continuation rows are indented so a folded line still reads as one. The view's text is ASCII and a few
 * one-column symbols (→, …), so characters are columns.
 */
export function fold(line: string, columns: number): string[] {
  const width = Math.max(columns - 1, 8);
  const chars = [...line];
  if (chars.length <= width) return [line];
  const rows = [chars.slice(0, width).join("")];
  const indent = "    ";
  for (let start = width; start < chars.length; start += width - indent.length) {
    rows.push(indent + chars.slice(start, start + width - indent.length).join(""));
  }
  return rows;
}

function block(f: LiveFigures): string[] {
  const clock =
    f.durationSeconds === null
      ? `${f.elapsedSeconds.toFixed(0)} s (Ctrl-C to stop)`
      : `${f.elapsedSeconds.toFixed(0)} / ${f.durationSeconds} s`;
  return [
    `  ${clock}   ${f.phase}   relay: ${relayState(f.relay)}`,
    `  written    ${count(f.written)}  ${rate(f.writtenPerSecond)}      pending       ${count(f.pending)}`,
    `  published  ${count(f.published)}  ${rate(f.publishedPerSecond)}      commit→publish  p50 ${ms(f.lagP50Ms)}  p99 ${ms(f.lagP99Ms)}`,
    `  consumed   ${count(f.consumed)}                commit→consume  p50 ${ms(f.endToEndP50Ms)}  p99 ${ms(f.endToEndP99Ms)}`,
    `  duplicates suppressed by inbox ${f.duplicatesSuppressed}   ${orderFigure(f)}   dead letters ${f.deadLetters}`,
  ];
}

function plainLine(f: LiveFigures): string {
  return [
    `t=${f.elapsedSeconds.toFixed(0)}s`,
    `written=${f.written}`,
    `pending=${f.pending}`,
    `published=${f.published}`,
    `published/s=${f.publishedPerSecond.toFixed(1)}`,
    `lag_p50_ms=${f.lagP50Ms === null ? "-" : Math.round(f.lagP50Ms)}`,
    `lag_p99_ms=${f.lagP99Ms === null ? "-" : Math.round(f.lagP99Ms)}`,
    `consumed=${f.consumed}`,
    `duplicates_suppressed=${f.duplicatesSuppressed}`,
    f.unordered === true
      ? `out_of_order_info=${f.lateArrivals ?? 0}`
      : `order_violations=${f.orderViolations}`,
    `dead_letters=${f.deadLetters}`,
    `relay_starts=${f.relay.starts}`,
    `relay_warnings=${f.relay.warnings}`,
  ].join(" ");
}

function orderFigure(f: LiveFigures): string {
  return f.unordered === true
    ? `out of order (info: the destination does not order) ${f.lateArrivals ?? 0}`
    : `order violations ${f.orderViolations}`;
}

function relayState(relay: LiveFigures["relay"]): string {
  const pid = relay.pid === undefined ? "restarting" : `pid ${relay.pid}`;
  const warnings = relay.warnings > 0 ? `, ${relay.warnings} warning(s) logged` : "";
  return `${pid}, ${relay.starts} start(s)${warnings}`;
}

function count(value: number): string {
  return String(value).padStart(7);
}

function rate(perSecond: number): string {
  return `${perSecond.toFixed(1).padStart(6)}/s`;
}

export function ms(value: number | null): string {
  if (value === null) return "-";
  return value < 10_000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(1)} s`;
}
