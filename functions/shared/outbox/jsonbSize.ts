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
  // Strings are matched whole so that digits inside them are skipped; only exponent numbers are left to count.
  for (const [token] of json.matchAll(STRING_OR_EXPONENT_NUMBER)) {
    if (token.charCodeAt(0) !== 34) extra += jsonbNumberLength(token) - token.length;
  }
  return Buffer.byteLength(json) + extra;
}

const STRING_OR_EXPONENT_NUMBER = /"(?:[^"\\]|\\.)*"|-?\d(?:\.\d+)?e[+-]?\d+/g;

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
