/**
 * The size of the body the relay will send for a payload, computed from its JSON.stringify text without a round
 * trip. The relay sends the stored jsonb's text (compacted: publisher.ts compactJsonbText), which differs from
 * JSON.stringify's in one way that matters for size: jsonb stores numbers as `numeric` and prints them in full,
 * never with an exponent. `1e-300` (6 characters) comes back as `0.000…001` (302): a 140 KB payload of such
 * numbers became a 6 MB message. Strings are escaped alike by both, keys are reordered (same size), and
 * duplicate keys cannot come from a JS object, so numbers are the whole difference.
 *
 * One pass with constant stack, whatever the payload: strings are skipped with `indexOf` to their closing quote
 * (an escaped quote is one preceded by an odd run of backslashes), numbers are read outside strings only. A regex
 * that matched strings whole (`"(?:[^"\\]|\\.)*"`) backtracked per character and threw RangeError (stack
 * overflow) on one string of ~8 MiB; this costs ~1 ms per MiB on any shape (docs/benchmarks.md, "size check").
 */
export function jsonbBodySize(json: string): number {
  const bytes = Buffer.byteLength(json);
  // JSON.stringify writes an exponent only after a digit ("1e-7", "1.5e+21"); no such text, no difference.
  // (A single-character test: no backtracking, linear.)
  if (!/\de/.test(json)) return bytes;
  let extra = 0;
  let i = 0;
  while (i < json.length) {
    const code = json.charCodeAt(i);
    if (code === QUOTE) {
      i = stringEnd(json, i) + 1;
    } else if (code === MINUS || isDigit(code)) {
      const start = i;
      do i++;
      while (i < json.length && isNumberPart(json.charCodeAt(i)));
      const token = json.slice(start, i);
      extra += jsonbNumberLength(token) - token.length;
    } else {
      i++;
    }
  }
  return bytes + extra;
}

const QUOTE = 34;
const BACKSLASH = 92;
const MINUS = 45;

/** The index of the quote that closes the string opening at `open` (JSON.stringify's text: always closed). */
function stringEnd(json: string, open: number): number {
  let close = json.indexOf('"', open + 1);
  while (close !== -1) {
    let backslashes = 0;
    while (json.charCodeAt(close - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return close;
    close = json.indexOf('"', close + 1);
  }
  return json.length;
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/** Digits, `.`, `e`/`E`, `+`, `-`: what can follow a number's first character in JSON. */
function isNumberPart(code: number): boolean {
  return isDigit(code) || code === 46 || code === 101 || code === 69 || code === 43 || code === MINUS;
}

/**
 * The length of a JSON number as Postgres prints it back from numeric: plain decimal notation, with as many
 * fraction digits as the input's scale (fraction digits minus the exponent). Only JS's exponent form
 * ("d[.ddd]e±n", one integer digit) changes; every other JSON.stringify number prints unchanged.
 */
export function jsonbNumberLength(token: string): number {
  const match = /^(-?)\d(?:\.(\d+))?e([+-]?\d+)$/.exec(token);
  if (match === null) return token.length;
  const [, sign = "", fraction = "", exponent = "0"] = match;
  const digits = 1 + fraction.length;
  // The decimal point sits after digit (1 + exponent) of the digits, padded with zeros on whichever side.
  const point = 1 + Number(exponent);
  if (point <= 0) return sign.length + 2 - point + digits; // 0.000ddd
  if (point >= digits) return sign.length + point; // ddd000
  return sign.length + digits + 1; // dd.d
}
