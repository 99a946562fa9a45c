/**
 * The size of the body the relay will send for a payload, computed from its JSON.stringify text without a round
 * trip. The relay sends the stored jsonb's text (compacted: publisher.ts compactJsonbText), which differs from
 * JSON.stringify's in one way that matters for size: jsonb stores numbers as `numeric` and prints them in full,
 * never with an exponent. `1e-300` (6 characters) comes back as `0.000…001` (302): a 140 KB payload of such
 * numbers became a 6 MB message. Strings are escaped alike by both, keys are reordered (same size), and
 * duplicate keys cannot come from a JS object, so numbers are the whole difference.
 */
export function jsonbBodySize(json: string): number {
  // JSON.stringify writes an exponent only after a digit ("1e-7", "1.5e+21"); no such text, no difference.
  if (!/\de/.test(json)) return Buffer.byteLength(json);
  let extra = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const code = json.charCodeAt(i);
    if (inString) {
      if (code === 92) i++;
      else if (code === 34) inString = false;
    } else if (code === 34) {
      inString = true;
    } else if (code === 45 || (code >= 48 && code <= 57)) {
      let end = i + 1;
      while (end < json.length && /[\d.eE+-]/.test(json.charAt(end))) end++;
      const token = json.slice(i, end);
      extra += jsonbNumberText(token).length - token.length;
      i = end - 1;
    }
  }
  return Buffer.byteLength(json) + extra;
}

/**
 * How Postgres prints a JSON number it stored as numeric: plain decimal notation, with as many fraction digits
 * as the input's scale (fraction digits minus the exponent). Only JS's exponent form ("d[.ddd]e±n", one integer
 * digit) needs expanding; every other JSON.stringify number prints unchanged.
 */
export function jsonbNumberText(token: string): string {
  const match = /^(-?)(\d)(?:\.(\d+))?e([+-]?\d+)$/i.exec(token);
  if (match === null) return token;
  const [, sign = "", integer = "", fraction = "", exponentText = "0"] = match;
  const exponent = Number(exponentText);
  const digits = integer + fraction;
  // The decimal point sits after digit (1 + exponent) of `digits`, padded with zeros on whichever side.
  const point = 1 + exponent;
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}
