/**
 * The live view of `npm start`: a small block redrawn in place once a second on a terminal, or one plain line
 * every few seconds when stdout is a pipe or a file (CI logs, `| tee`), plus chaos events as they happen.
 */
import { LiveBlock, ms, type TerminalOutput } from "../../cli/dev/liveBlock.ts";
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

export class Dashboard {
  readonly #out: TerminalOutput;
  readonly #block: LiveBlock | undefined;
  readonly #header: string;
  readonly #events: string[] = [];
  #lastPlain = Number.NEGATIVE_INFINITY;

  constructor(header: string, out: TerminalOutput = process.stdout) {
    this.#out = out;
    this.#block = out.isTTY === true ? new LiveBlock(out) : undefined;
    this.#header = header;
  }

  /** A notable moment (chaos, restarts): kept in the view on a terminal, printed at once otherwise. */
  event(elapsedSeconds: number, text: string): void {
    const line = `${elapsedSeconds.toFixed(1).padStart(6)} s  ${text}`;
    this.#events.push(line);
    if (this.#block === undefined) this.#out.write(`  ${line}\n`);
  }

  update(figures: LiveFigures): void {
    if (this.#block === undefined) {
      if (figures.elapsedSeconds - this.#lastPlain < PLAIN_EVERY_SECONDS) return;
      this.#lastPlain = figures.elapsedSeconds;
      this.#out.write(`${plainLine(figures)}\n`);
      return;
    }
    const lines = [this.#header, ...block(figures)];
    if (this.#events.length > 0) lines.push("  events", ...this.#events.slice(-8).map((line) => `  ${line}`));
    this.#block.draw(lines);
  }

  /** Leaves the last block on screen and gives the cursor back. */
  close(): void {
    this.#block?.close();
  }
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
