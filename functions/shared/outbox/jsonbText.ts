/**
 * jsonb prints `{"a": 1, "b": [1, 2]}`; what the relay sends is the compact form, the same bytes JSON.stringify
 * gave the write API's size check. Only the separators' spaces exist outside strings, so dropping every space
 * outside a string literal is exact, and much cheaper than JSON.parse + stringify (which would also round big
 * numbers).
 */
export function compactJsonbText(text: string): string {
  if (!text.includes(" ")) return text;
  let out = "";
  let start = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 92)
        i++; // backslash: skip the escaped character
      else if (code === 34) inString = false;
    } else if (code === 34) {
      inString = true;
    } else if (code === 32) {
      out += text.slice(start, i);
      start = i + 1;
    }
  }
  return out + text.slice(start);
}
