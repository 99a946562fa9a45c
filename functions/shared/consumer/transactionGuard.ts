import type { Queryable } from "../db/session.ts";
import { OutboxError } from "../outbox/errors.ts";
import type { InboxClient } from "./libraries.ts";

/**
 * Thrown (and remembered: the record fails even if the handler catches it) when the user's handler sends,
 * through `context.client`, a statement that would end, restart or reconfigure the record's transaction or
 * change a session-level setting, a query form the guard cannot force into one statement, or anything after
 * the handler returned; and when the record's transaction is found not to be the one it began.
 */
export class TransactionControlError extends OutboxError {
  override name = "TransactionControlError";
}

/**
 * `context.client`: the record's session, through which no statement runs outside the record's transaction and
 * nothing commits or rolls back the inbox row. Decided by how Postgres will execute the statement, not by
 * parsing SQL:
 *
 * 1. **One statement per query.** Every query goes out on the extended protocol (pg's `queryMode: "extended"`,
 *    whatever form the handler used: text, text and values, a config object, a named statement), where the
 *    server itself refuses a text of several statements ("cannot insert multiple commands into a prepared
 *    statement", 42601). So nothing can hide a second statement behind a literal, an identifier, a dollar quote
 *    or a `standard_conforming_strings` the handler changed: the server does the splitting, and it refuses.
 *    (pg's `values: []` alone does not do it: an empty array is sent on the simple protocol, which runs them all.)
 *    A form the guard cannot rewrite (a Submittable: pg-cursor, pg-query-stream) or a callback is refused.
 * 2. **The leading keyword decides.** A single statement's command is its first keyword, after whitespace,
 *    comments and empty statements (`;commit` is a COMMIT: Postgres's grammar drops the empty statement before
 *    it; a comment cannot hide a second statement: there is none). Refused: transaction control (`begin`,
 *    `start transaction`, `commit`, `end`, `abort`, `rollback` other than `rollback to`, `prepare transaction`,
 *    `set transaction`, `set local transaction`), session-level state (`set` without `local`, `set session`,
 *    `reset`, `discard`, `listen`, `prepare`): it would outlive the record, and behind a transaction pooler reach
 *    other clients; and `copy` (FROM STDIN would wait for data no one sends, past the statement timeout).
 *    `set local` and `set constraints` (but `set constraints all immediate`, which would fire the inbox row's commit
 *    check early) stay allowed (they end with the transaction), and so do the handler's own
 *    savepoints (`savepoint`, `release`, `rollback to`): taken after the inbox row, rolling back to one cannot
 *    undo it. Code that runs inside a statement cannot end the transaction either: Postgres refuses
 *    `commit`/`rollback` in a `do` block or procedure called inside a transaction block (2D000).
 * 3. **The server says whether the transaction is still open**, after every statement: pg keeps the status each
 *    ReadyForQuery carries, and once it is idle ("I") the statement that ended the transaction is answered with
 *    a TransactionControlError and nothing more is sent (statements go out one at a time, so none queued behind
 *    it can autocommit). Before the commit (recordPipeline.ts, sql/sameTransaction.ts) the inbox insert's
 *    transaction id is compared with the current one, and the commit marked as the pipeline's. A session that
 *    left the record's transaction by a path not foreseen here fails the record loudly instead of committing
 *    work that is not the record's.
 * 4. **The server refuses any other commit of the record** (inbox migration 0005): the inbox insert marks its
 *    transaction as a record's, and a deferred trigger fails a COMMIT of it that the pipeline did not mark, so a
 *    commit that got past everything above rolls back the inbox row with the handler's writes.
 * What a statement can still leave on the session through a function or a DO block (`set_config(…, false)`,
 * session advisory locks, LISTEN, PREPARE, temp tables, WITH HOLD cursors) is discarded with the end of the
 * record's transaction, commit or rollback, in the same round trip (db/session.ts, `resetSession`).
 *
 * Why not a savepoint around the handler: a savepoint stops neither a `commit` (which commits the inbox row with
 * whatever was written before it) nor a `rollback` (which ends the transaction the inbox row is in).
 *
 * After the handler returns the client refuses everything: a query left running (not awaited) or a client kept
 * for later would otherwise write outside any record's transaction.
 */
export interface GuardedClient {
  client: InboxClient;
  /** The first refused statement, if any: the record fails with it even if the handler swallowed it. */
  refused(): TransactionControlError | undefined;
  close(): void;
}

/** What pg's `client.query` is given as a config object (the fields the guard reads or sets). */
interface QueryConfig {
  text: string;
  values?: unknown[];
  name?: string;
  queryMode?: "extended";
  [field: string]: unknown;
}

export function guardClient(session: Queryable): GuardedClient {
  let refusal: TransactionControlError | undefined;
  let closed = false;
  // One statement at a time: each waits for the one before it to be answered and for the server's word that the
  // transaction is still open (below). pg would queue them anyway; a second one queued behind a statement that
  // ended the transaction would go out the moment the first is answered, before anything here could stop it.
  let previous: Promise<unknown> = Promise.resolve();
  const refuse = (message: string) => {
    const error = new TransactionControlError(message);
    refusal ??= error;
    return Promise.reject(error);
  };
  // Set once the server said the transaction is over: every statement after it is refused unsent.
  let ended: TransactionControlError | undefined;
  const send = async (form: QueryConfig): Promise<unknown> => {
    if (ended === undefined && transactionStatus(session) !== "I") {
      // A config object: pg's Client and PoolClient take it; a lent session must be one of them (inboxOptions.ts).
      const answer = (session.query as unknown as (config: QueryConfig) => Promise<unknown>)(form);
      await answer.catch(() => {});
      if (transactionStatus(session) !== "I") return answer;
    }
    ended ??= new TransactionControlError(
      "the server reports that the record's transaction ended (a statement on context.client ended it): nothing " +
        "more is sent on it, nothing is committed, and the record fails",
    );
    refusal ??= ended;
    throw ended;
  };
  const query = (first: unknown, second?: unknown, ...rest: unknown[]) => {
    if (closed) {
      return refuse(
        "context.client was used after its record's handler returned: it belongs to that record's transaction",
      );
    }
    const form = singleStatement(first, second, rest);
    if (typeof form === "string")
      return refuse(
        `${form} on context.client is refused: ${form === "a callback" ? "use the promise it returns" : "the guard can only run a query it can send as one statement on the extended protocol (text, text and values, or a config object with text)"}`,
      );
    const refused = refusedStatement(form.text);
    if (refused !== undefined) {
      return refuse(
        `${JSON.stringify(refused.words)} on context.client: ${refused.reason}. The record's transaction carries its ` +
          "inbox row; it commits after the handler returns and rolls back if the handler throws (use a savepoint " +
          "of your own to undo part of the work, and `set local` for a setting)",
      );
    }
    const result = previous.then(() => send(form));
    previous = result.catch(() => {});
    return result;
  };
  return {
    client: { query, getTransactionStatus: () => "T" as const } as InboxClient,
    refused: () => refusal,
    close: () => {
      closed = true;
    },
  };
}

/**
 * The transaction status the server sent with its last ReadyForQuery ("I" idle, "T" in a transaction, "E" in a
 * failed one), as pg's Client keeps it; undefined from a session that does not say (then the check before the
 * commit, sql/sameTransaction.ts, is what stops the record).
 */
function transactionStatus(session: Queryable): string | null | undefined {
  const { getTransactionStatus } = session as { getTransactionStatus?: () => string | null };
  return typeof getTransactionStatus === "function" ? getTransactionStatus.call(session) : undefined;
}

/**
 * pg's query forms as one config object on the extended protocol, or what the form is when the guard cannot do
 * that. pg's own precedence: a `values` argument replaces the config's.
 */
function singleStatement(first: unknown, second: unknown, rest: unknown[]): QueryConfig | string {
  if (typeof second === "function" || rest.some((argument) => typeof argument === "function")) {
    return "a callback";
  }
  if (second !== undefined && !Array.isArray(second)) return "a values argument that is not an array";
  if (typeof first === "string")
    return { text: first, values: (second as unknown[] | undefined) ?? [], queryMode: "extended" };
  if (typeof first !== "object" || first === null) return `a query of type ${typeof first}`;
  if (typeof (first as { submit?: unknown }).submit === "function") {
    return "a submittable (pg-cursor, pg-query-stream or a pg Query object)";
  }
  const config = first as QueryConfig;
  if (typeof config.text !== "string") return "a query config without a text";
  if (config.values !== undefined && !Array.isArray(config.values))
    return "a query config whose values is not an array";
  return {
    ...config,
    values: (second as unknown[] | undefined) ?? config.values ?? [],
    queryMode: "extended",
  };
}

/** Why a statement is refused, and its leading words as the user wrote them. */
export interface RefusedStatement {
  words: string;
  reason: string;
}

const TRANSACTION_CONTROL = "transaction control is refused";
const SESSION_STATE =
  "a session-level setting would outlive the record (and behind a transaction pooler reach other clients); use `set local`";

const COMMIT_CHECK =
  "it would run the inbox row's commit check (a deferred trigger, inbox migration 0005) before the record's " +
  "commit, failing the record; name your own constraints instead";
const LISTEN =
  "a LISTEN takes effect when the record commits, on a session the next record (or behind a transaction pooler " +
  "another client) gets, and its notifications reach no one";
const PREPARED_STATEMENT =
  "a prepared statement outlives the record's transaction (a rollback keeps it); send the query with its values";
const COPY =
  "COPY FROM STDIN waits for data context.client never sends, past the statement timeout, and COPY TO STDOUT's " +
  "rows are not a query's result; use insert … select or a select";

/**
 * Whether ONE statement (the guard sends nothing else: see guardClient) controls the transaction or changes
 * session-level state, judged by its leading keywords. Not a parser: it reads words only up to the first thing
 * that is not a keyword (a literal, a quoted identifier, an operator), which in a single statement is past its
 * command.
 */
export function refusedStatement(text: string): RefusedStatement | undefined {
  const words = leadingWords(text, 4);
  const [first = "", second = "", third = "", fourth = ""] = words.map((word) => word.toLowerCase());
  const lead = (count: number, reason: string) => ({ words: words.slice(0, count).join(" "), reason });
  switch (first) {
    case "begin":
    case "commit":
    case "end":
    case "abort":
      return lead(1, TRANSACTION_CONTROL);
    case "rollback":
      // `rollback to [savepoint] x` and `rollback transaction|work to x` undo to the handler's own savepoint.
      if (second === "to" || ((second === "transaction" || second === "work") && third === "to"))
        return undefined;
      return lead(1, TRANSACTION_CONTROL);
    case "start":
      return second === "transaction" ? lead(2, TRANSACTION_CONTROL) : undefined;
    case "prepare":
      return second === "transaction" ? lead(2, TRANSACTION_CONTROL) : lead(1, PREPARED_STATEMENT);
    case "set":
      if (second === "transaction") return lead(2, TRANSACTION_CONTROL);
      if (second === "local") return third === "transaction" ? lead(3, TRANSACTION_CONTROL) : undefined;
      if (second === "constraints") {
        return third === "all" && fourth === "immediate" ? lead(4, COMMIT_CHECK) : undefined;
      }
      if (second === "session" && (third === "characteristics" || third === "transaction")) {
        return lead(3, TRANSACTION_CONTROL);
      }
      return lead(second === "session" ? 3 : 2, SESSION_STATE);
    case "reset":
    case "discard":
      return lead(2, SESSION_STATE);
    case "listen":
      return lead(1, LISTEN);
    case "copy":
      return lead(1, COPY);
    default:
      return undefined;
  }
}

/**
 * Up to `count` leading words of `text`, skipping whitespace and comments before and between them, and the
 * empty statements (`;`) before the first (`--` to the end of the line; block comments, nested, as Postgres allows:
 * https://www.postgresql.org/docs/current/sql-syntax-lexical.html#SQL-SYNTAX-COMMENTS). A word is what Postgres
 * reads as an identifier or key word: a letter, `_` or any non-ASCII character, then those, digits or `$`. Stops
 * at anything else.
 */
export function leadingWords(text: string, count: number): string[] {
  const words: string[] = [];
  let index = 0;
  while (index < text.length && words.length < count) {
    const char = text[index] as string;
    if (/[ \t\n\r\f\v]/.test(char)) {
      index++;
    } else if (char === ";" && words.length === 0) {
      // An empty statement: Postgres's grammar drops it (stmtmulti), so `;commit` is one statement, a COMMIT.
      index++;
    } else if (text.startsWith("--", index)) {
      while (index < text.length && text[index] !== "\n" && text[index] !== "\r") index++;
    } else if (text.startsWith("/*", index)) {
      let depth = 0;
      do {
        if (text.startsWith("/*", index)) {
          depth++;
          index += 2;
        } else if (text.startsWith("*/", index)) {
          depth--;
          index += 2;
        } else index++;
      } while (depth > 0 && index < text.length);
    } else {
      const word = /^[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*/.exec(text.slice(index))?.[0];
      if (word === undefined) break;
      words.push(word);
      index += word.length;
    }
  }
  return words;
}
