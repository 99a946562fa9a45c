import { describe, expect, it } from "vitest";
import { fold } from "../../cli/dev/liveBlock.ts";
import { Dashboard, type LiveFigures } from "../../local/demo/dashboard.ts";

/**
 * Just enough of a terminal to see what the live view leaves on screen: `columns` wide, auto-wrapping when a
 * character is written past the last column (as xterm does), newline, CSI n F (to the start of the line n up),
 * CSI J (clear to the end of the screen); other escapes (cursor visibility) are ignored.
 */
const CSI = new RegExp(`^${String.fromCharCode(27)}\\[(\\??)(\\d*)([A-Za-z])`);

class Terminal {
  readonly rows: string[][] = [[]];
  row = 0;
  col = 0;
  readonly isTTY = true;
  readonly columns: number;
  constructor(columns: number) {
    this.columns = columns;
  }

  write(text: string) {
    for (let i = 0; i < text.length; i++) {
      const control = CSI.exec(text.slice(i));
      if (control !== null) {
        const [sequence, privateMode, count, command] = control;
        if (privateMode === "" && command === "F") {
          this.row = Math.max(0, this.row - Number(count || 1));
          this.col = 0;
        } else if (privateMode === "" && command === "J") {
          this.rows.length = this.row + 1;
          this.#line().length = this.col;
        }
        i += sequence.length - 1;
      } else if (text[i] === "\n") {
        this.row++;
        this.col = 0;
      } else {
        if (this.col === this.columns) {
          this.row++;
          this.col = 0;
        }
        this.#line()[this.col++] = text[i] as string;
      }
    }
  }

  screen(): string[] {
    return this.rows.map((row) => row.join("").trimEnd());
  }

  #line(): string[] {
    while (this.rows.length <= this.row) this.rows.push([]);
    return this.rows[this.row] as string[];
  }
}

function figures(elapsedSeconds: number): LiveFigures {
  return {
    elapsedSeconds,
    durationSeconds: null,
    written: 1200 + elapsedSeconds,
    writtenPerSecond: 25,
    pending: 3,
    published: 1190,
    publishedPerSecond: 24.5,
    lagP50Ms: 21,
    lagP99Ms: 95,
    consumed: 1185,
    endToEndP50Ms: 30,
    endToEndP99Ms: 140,
    duplicatesSuppressed: 4,
    orderViolations: 0,
    deadLetters: 0,
    relay: { pid: 4242, starts: 2, warnings: 1 },
    phase: "running",
  };
}

const HEADER =
  'outbox demo: orders service -> "public"."outbox_events" -> relay (outbox relay, dwell) -> SQS FIFO -> ' +
  "consumer (inbox)   CHAOS ON";

describe("npm start's live view on a narrow terminal", () => {
  it("redraws in place: one header, nothing wider than the terminal, only the last frame on screen", () => {
    const terminal = new Terminal(50);
    const view = new Dashboard(HEADER, terminal);
    view.event(3.2, "chaos: SQS endpoint down (503 to every request) for 3 s, then the relay will be killed");
    for (let second = 1; second <= 4; second++) view.update(figures(second));

    const screen = terminal.screen().filter((row) => row !== "");
    expect(screen.filter((row) => row.startsWith("outbox demo:"))).toHaveLength(1);
    expect(screen.filter((row) => row.includes("written"))).toHaveLength(1);
    expect(screen.find((row) => row.includes("written"))).toContain("1204");
    expect(Math.max(...screen.map((row) => row.length))).toBeLessThan(50);
  });

  it("folds a long line into indented rows one column short of the width, keeping every character", () => {
    const line = "x".repeat(45);
    const rows = fold(line, 20);
    expect(rows.every((row) => row.length <= 19)).toBe(true);
    expect(rows.slice(1).every((row) => row.startsWith("    "))).toBe(true);
    expect(rows.map((row, index) => (index === 0 ? row : row.slice(4))).join("")).toBe(line);
    expect(fold("short", 20)).toEqual(["short"]);
  });
});
