/**
 * `outbox dev`'s live view: the banner, then on a terminal a block redrawn once a second (events/s, pending, the
 * oldest pending event's age, the last deliveries, dead letters, handler failures, warnings); when stdout is a
 * pipe or a file, one log line per delivery and per problem, and the figures every few seconds when they move.
 */

import type { ConsumerStats, DeliveryNote } from "./eventSources.ts";
import { LiveBlock, ms, type TerminalOutput } from "./liveBlock.ts";
import type { OutboxFigures } from "./outboxFigures.ts";

const LAST_DELIVERIES = 5;
const LAST_PROBLEMS = 3;
const PLAIN_EVERY_MS = 5_000;

export interface ViewFigures {
  outbox: OutboxFigures;
  /** Published per second over the figures' window. */
  publishedPerSecond: number;
  consumer: ConsumerStats | undefined;
}

export class DevView {
  readonly #out: TerminalOutput;
  readonly #block: LiveBlock | undefined;
  readonly #banner: string[];
  readonly #deliveries: DeliveryNote[] = [];
  readonly #problems: string[] = [];
  #lastPlain = 0;
  #lastPlainLine = "";

  constructor(banner: string[], out: TerminalOutput) {
    this.#out = out;
    this.#banner = banner;
    if (out.isTTY === true) this.#block = new LiveBlock(out);
    else out.write(`${banner.join("\n")}\n`);
  }

  delivered(notes: DeliveryNote[]): void {
    this.#deliveries.push(...notes);
    this.#deliveries.splice(0, Math.max(0, this.#deliveries.length - LAST_DELIVERIES));
    if (this.#block !== undefined) return;
    for (const note of notes) this.#out.write(`${deliveryLine(note)}\n`);
  }

  /** A handler failure, a relay warning, an event source that cannot poll. */
  problem(text: string): void {
    const line = `${time(new Date())}  ${text}`;
    this.#problems.push(line);
    this.#problems.splice(0, Math.max(0, this.#problems.length - LAST_PROBLEMS));
    if (this.#block === undefined) this.#out.write(`${line}\n`);
  }

  update(figures: ViewFigures): void {
    if (this.#block === undefined) {
      const line = plainLine(figures);
      const now = Date.now();
      if (line === this.#lastPlainLine || now - this.#lastPlain < PLAIN_EVERY_MS) return;
      this.#lastPlain = now;
      this.#lastPlainLine = line;
      this.#out.write(`${line}\n`);
      return;
    }
    this.#block.draw([...this.#banner, "", ...this.#lines(figures)]);
  }

  close(): void {
    this.#block?.close();
  }

  #lines(f: ViewFigures): string[] {
    const o = f.outbox;
    const lines = [
      `  events/s ${f.publishedPerSecond.toFixed(1).padStart(6)}   published ${o.published}   pending ${o.pending}` +
        `   oldest pending ${ms(o.oldestPendingMs)}   dead letters ${o.deadLetters}`,
    ];
    if (f.consumer !== undefined) {
      const c = f.consumer;
      lines.push(
        `  handler: ${c.invocations} call(s), ${c.records} record(s), ${c.failedRecords} failed record(s), ` +
          `${c.handlerErrors} error(s)`,
      );
      lines.push("  last deliveries", ...(this.#deliveries.length === 0 ? ["    (none yet)"] : []));
      lines.push(...this.#deliveries.map((note) => `    ${deliveryLine(note)}`));
    }
    if (this.#problems.length > 0) lines.push("  problems", ...this.#problems.map((line) => `    ${line}`));
    lines.push("  Ctrl-C to stop");
    return lines;
  }
}

function deliveryLine(note: DeliveryNote): string {
  return `${time(note.at)}  ${note.ok ? "handled" : "FAILED "}  ${note.what}  (${note.source})`;
}

function plainLine(f: ViewFigures): string {
  const o = f.outbox;
  const c = f.consumer;
  return [
    `published=${o.published}`,
    `pending=${o.pending}`,
    `oldest_pending_ms=${o.oldestPendingMs === null ? "-" : Math.round(o.oldestPendingMs)}`,
    `dead_letters=${o.deadLetters}`,
    ...(c === undefined
      ? []
      : [
          `handled_records=${c.records - c.failedRecords}`,
          `failed_records=${c.failedRecords}`,
          `handler_errors=${c.handlerErrors}`,
        ]),
  ].join(" ");
}

const time = (at: Date) => at.toISOString().slice(11, 23);
