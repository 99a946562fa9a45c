/**
 * JSON.stringify(value, replacer) without recursion, for payloads nested deeper than V8's stack allows: native
 * JSON.stringify recurses per level and throws RangeError at ~2,000-5,000 levels (less inside a worker's smaller
 * stack), while jsonb takes ~10,000 at Postgres's default max_stack_depth of 2 MB. The write API calls it only
 * after the native one overflowed, so ordinary payloads keep the native speed; the output is the same text.
 *
 * The steps of ECMAScript's SerializeJSONProperty, in order: `toJSON`, then the replacer (with the holder as
 * `this`), then Number/String/Boolean/BigInt wrappers unwrapped; undefined, functions and symbols are left out of
 * objects and become `null` in arrays; a BigInt or a cycle throws TypeError, as natively. Keys in Object.keys
 * order (JSON.stringify's EnumerableOwnProperties). Strings and numbers go through native JSON.stringify, which
 * does not recurse for them.
 */
export function stringifyWithoutRecursion(
  value: unknown,
  replacer: (this: unknown, key: string, value: unknown) => unknown,
): string | undefined {
  const out: string[] = [];
  const stack: Frame[] = [];
  const onPath = new Set<object>();

  /** Writes a prepared value, or opens a frame for an object; false when there is nothing to write. */
  const write = (item: unknown): boolean => {
    if (item === null) out.push("null");
    else if (typeof item === "boolean") out.push(item ? "true" : "false");
    else if (typeof item === "string" || typeof item === "number") out.push(JSON.stringify(item));
    else if (typeof item === "bigint") throw new TypeError("Do not know how to serialize a BigInt");
    else if (typeof item === "object") {
      if (onPath.has(item)) throw new TypeError("Converting circular structure to JSON");
      onPath.add(item);
      const array = Array.isArray(item);
      out.push(array ? "[" : "{");
      const keys = array ? undefined : Object.keys(item);
      stack.push({
        holder: item,
        keys,
        length: array ? item.length : (keys?.length ?? 0),
        next: 0,
        wrote: 0,
      });
    } else return false; // undefined, function, symbol
    return true;
  };

  if (!write(prepare({ "": value }, "", replacer))) return undefined;
  for (;;) {
    const frame = stack.at(-1);
    if (frame === undefined) break;
    if (frame.next === frame.length) {
      out.push(frame.keys === undefined ? "]" : "}");
      onPath.delete(frame.holder);
      stack.pop();
      continue;
    }
    const index = frame.next++;
    if (frame.keys === undefined) {
      if (frame.wrote++ > 0) out.push(",");
      if (!write(prepare(frame.holder, String(index), replacer))) out.push("null");
    } else {
      const key = frame.keys[index] as string;
      const item = prepare(frame.holder, key, replacer);
      if (item === undefined || typeof item === "function" || typeof item === "symbol") continue;
      out.push(`${frame.wrote++ > 0 ? "," : ""}${JSON.stringify(key)}:`);
      write(item);
    }
  }
  return out.join("");
}

interface Frame {
  holder: object;
  /** The object's keys; undefined for an array. */
  keys: string[] | undefined;
  length: number;
  next: number;
  wrote: number;
}

function prepare(
  holder: object,
  key: string,
  replacer: (this: unknown, key: string, value: unknown) => unknown,
): unknown {
  let item = (holder as Record<string, unknown>)[key];
  if ((typeof item === "object" && item !== null) || typeof item === "bigint") {
    const toJSON = (item as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") item = toJSON.call(item, key);
  }
  item = replacer.call(holder, key, item);
  if (item instanceof Number) return Number(item);
  if (item instanceof String) return String(item);
  if (item instanceof Boolean) return item.valueOf();
  if (item instanceof BigInt) return item.valueOf();
  return item;
}
