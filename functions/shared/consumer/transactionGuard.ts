import type { Queryable } from "../db/session.ts";
import { OutboxError } from "../outbox/errors.ts";

/**
 * Thrown (and remembered: the record fails even if the handler catches it) when the user's handler sends a
 * statement that would end, restart or reconfigure the record's transaction through `context.client`.
 */
export class TransactionControlError extends OutboxError {
  override name = "TransactionControlError";
}

/**
 * `context.client`: the record's session with transaction control refused. Why refuse rather than run the
 * handler under a savepoint: a savepoint does not stop a `commit` (it commits the inbox row with whatever was
 * written before it, and the redelivery is then a "duplicate" whose remainder never runs), nor a `rollback`
 * (which ends the transaction the inbox row is in). Only refusing the statement keeps the inbox row and the
 * handler's writes in one transaction. Savepoints of the handler's own (`savepoint`, `release`, `rollback to`)
 * stay allowed: they are taken after the inbox row, so rolling back to one cannot undo it, and they are the
 * safe way to catch an expected error (a unique violation) without aborting the record's transaction.
 *
 * After the handler returns the client refuses everything: a query left running (not awaited) or a client kept
 * for later would otherwise write outside any record's transaction.
 */
export interface GuardedClient {
  client: Queryable;
  /** The first refused statement, if any: the record fails with it even if the handler swallowed it. */
  refused(): TransactionControlError | undefined;
  close(): void;
}

export function guardClient(session: Queryable): GuardedClient {
  let refusal: TransactionControlError | undefined;
  let closed = false;
  const query = (...args: unknown[]) => {
    const first = args[0] as { text?: unknown } | string | undefined;
    const text = typeof first === "string" ? first : first?.text;
    const refusedStatement = closed
      ? "any statement"
      : typeof text === "string"
        ? transactionControlIn(text)
        : undefined;
    if (refusedStatement !== undefined) {
      const error = new TransactionControlError(
        closed
          ? "context.client was used after its record's handler returned: it belongs to that record's transaction"
          : `${JSON.stringify(refusedStatement)} on context.client: transaction control is refused. The record's ` +
              "transaction carries its inbox row; it commits after the handler returns and rolls back if the handler " +
              "throws (use a savepoint of your own to undo part of the work)",
      );
      refusal ??= error;
      return Promise.reject(error);
    }
    return (session.query as (...a: unknown[]) => Promise<unknown>)(...args);
  };
  return {
    client: { query } as Queryable,
    refused: () => refusal,
    close: () => {
      closed = true;
    },
  };
}

/**
 * The first statement in `text` that controls the transaction, as the user wrote its leading keywords, or
 * undefined. `text` may hold several statements (the simple query protocol runs them all): it is split at
 * semicolons outside string literals, quoted identifiers, dollar quotes and comments (nested block comments,
 * as Postgres allows: https://www.postgresql.org/docs/current/sql-syntax-lexical.html#SQL-SYNTAX-COMMENTS).
 * A `do` block or procedure that commits is refused by Postgres itself inside a transaction block.
 */
export function transactionControlIn(text: string): string | undefined {
  for (const statement of statements(text)) {
    const words = statement.trim().split(/\s+/);
    const [first = "", second = "", third = ""] = words.map((word) => word.toLowerCase());
    const lead = (count: number) => words.slice(0, count).join(" ");
    switch (first) {
      case "begin":
      case "commit":
      case "end":
      case "abort":
        return lead(1);
      case "rollback":
        // `rollback to [savepoint] x` and `rollback transaction|work to x` undo to the handler's own savepoint.
        if (second === "to" || ((second === "transaction" || second === "work") && third === "to")) break;
        return lead(1);
      case "start":
        if (second === "transaction") return lead(2);
        break;
      case "prepare":
        if (second === "transaction") return lead(2);
        break;
      case "set":
        if (second === "transaction") return lead(2);
        if (second === "session" && third === "characteristics") return lead(3);
        if ((second === "local" || second === "session") && third === "transaction") return lead(3);
        break;
    }
  }
  return undefined;
}

/** The statements of `text`, comments blanked out, literals kept whole. */
function statements(text: string): string[] {
  const found: string[] = [];
  let current = "";
  let index = 0;
  while (index < text.length) {
    const char = text[index] as string;
    const next = text[index + 1];
    if (char === "-" && next === "-") {
      const end = text.indexOf("\n", index);
      index = end === -1 ? text.length : end + 1;
      current += " ";
    } else if (char === "/" && next === "*") {
      let depth = 0;
      while (index < text.length) {
        if (text.startsWith("/*", index)) {
          depth++;
          index += 2;
        } else if (text.startsWith("*/", index)) {
          depth--;
          index += 2;
          if (depth === 0) break;
        } else index++;
      }
      current += " ";
    } else if (char === "'" || char === '"') {
      // E'...' strings allow backslash escapes; '' (or "") inside doubles the quote in both kinds.
      const escapes = char === "'" && /[eE]$/.test(current);
      let end = index + 1;
      while (end < text.length) {
        if (escapes && text[end] === "\\") end += 2;
        else if (text[end] === char && text[end + 1] === char) end += 2;
        else if (text[end] === char) break;
        else end++;
      }
      current += text.slice(index, end + 1);
      index = end + 1;
    } else if (char === "$" && !/[\w$]$/.test(current)) {
      const tag = /^\$(?:[A-Za-z_\u0080-\uffff][\w\u0080-\uffff]*)?\$/.exec(text.slice(index))?.[0];
      if (tag === undefined) {
        current += char;
        index++;
      } else {
        const end = text.indexOf(tag, index + tag.length);
        const stop = end === -1 ? text.length : end + tag.length;
        current += text.slice(index, stop);
        index = stop;
      }
    } else if (char === ";") {
      found.push(current);
      current = "";
      index++;
    } else {
      current += char;
      index++;
    }
  }
  found.push(current);
  return found;
}
