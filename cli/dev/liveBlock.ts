/**
 * A block of lines redrawn in place on a terminal (the live views of `outbox dev` and `npm start`). Lines are
 * folded to the terminal's width before drawing, so each row written is one row on screen and the next rewind
 * lands exactly on the block's first row.
 */

/** Where a view is drawn: process.stdout, or a test's stand-in with a chosen width. */
export interface TerminalOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** When the output reports no width (not a terminal), the width lines are folded to. */
const DEFAULT_COLUMNS = 80;

export class LiveBlock {
  readonly #out: TerminalOutput;
  #drawnRows = 0;

  constructor(out: TerminalOutput) {
    this.#out = out;
    out.write("\x1b[?25l"); // hide the cursor while redrawing
  }

  draw(lines: readonly string[]): void {
    // The terminal wraps a line wider than itself onto more rows than we would count, and the next rewind would
    // then stop short of the top: the header ends up repeated down the screen. Fold the lines ourselves, so
    // every row we write is one row on screen, and rewind exactly that many (read the width on every frame:
    // the window may have been resized).
    // A pseudo-terminal without a size (script, some CI runners) reports 0 columns: treated as unknown.
    const rows = lines.flatMap((line) => fold(line, this.#out.columns || DEFAULT_COLUMNS));
    const rewind = this.#drawnRows > 0 ? `\x1b[${this.#drawnRows}F\x1b[J` : "";
    this.#out.write(`${rewind}${rows.join("\n")}\n`);
    this.#drawnRows = rows.length;
  }

  /** Leaves the last block on screen and gives the cursor back. */
  close(): void {
    this.#out.write("\x1b[?25h");
  }
}

/**
 * Splits a line into rows of at most `columns - 1` characters. One short of the width: a row that fills the
 * last column leaves some terminals in their pending-wrap state, where the newline that follows can count
 * twice. Continuation rows are indented so a folded line still reads as one. The views' text is ASCII and a few
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

export function ms(value: number | null): string {
  if (value === null) return "-";
  return value < 10_000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(1)} s`;
}
