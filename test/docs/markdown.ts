import { readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";

/** Reading the documentation as data: the tests in test/docs compare what it says with what the code defines. */

export const REPOSITORY = realpathSync(new URL("../..", import.meta.url));
export const read = (path: string) => readFileSync(join(REPOSITORY, path), "utf8");

/** A markdown table: its header cells and its rows' cells, code spans kept as written. */
export interface Table {
  header: string[];
  rows: string[][];
}

function cells(line: string): string[] {
  // A `|` inside a code span (`"relay" | "purge"`) is not a column break.
  const parts: string[] = [];
  let current = "";
  let inCode = false;
  for (const char of line.trim().replace(/^\||\|$/g, "")) {
    if (char === "`") inCode = !inCode;
    if (char === "|" && !inCode) {
      parts.push(current.trim());
      current = "";
    } else current += char;
  }
  parts.push(current.trim());
  return parts;
}

/** The first table after the heading whose text starts with `heading` (and whose first column is `column`, if given). */
export function tableUnder(doc: string, heading: string, column?: string): Table {
  const lines = read(doc).split("\n");
  const start = lines.findIndex(
    (line) => /^#{1,6} /.test(line) && line.replace(/^#+ /, "").startsWith(heading),
  );
  if (start === -1) throw new Error(`${doc} has no heading "${heading}"`);
  const first = lines.findIndex(
    (line, index) =>
      index > start &&
      line.trimStart().startsWith("|") &&
      !(lines[index - 1] ?? "").trimStart().startsWith("|") &&
      (column === undefined || cells(line)[0] === column),
  );
  if (first === -1) throw new Error(`${doc} has no table under "${heading}"`);
  const body: string[] = [];
  for (let index = first; index < lines.length && (lines[index] ?? "").trimStart().startsWith("|"); index++) {
    body.push(lines[index] ?? "");
  }
  const [header = "", , ...rows] = body;
  return { header: cells(header), rows: rows.map(cells) };
}

/** The code spans of a piece of markdown, in order, without their backticks. */
export function codeSpans(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? "");
}
