import { describe, expect, it } from "vitest";
import type { Queryable } from "../../functions/shared/consumer/index.ts";
import {
  guardClient,
  leadingWords,
  refusedStatement,
  TransactionControlError,
} from "../../functions/shared/consumer/transactionGuard.ts";

/**
 * The guard's design (transactionGuard.ts): every query goes out as ONE statement on the extended protocol (the
 * server refuses a text of several), so the statement's leading keywords decide. These cases pin what
 * refusedStatement answers for a single statement: the words it names, or undefined.
 */
describe("refusedStatement: one statement, judged by its leading keywords", () => {
  it.each([
    ["select 1"],
    ["insert into t (word) values ('begin')"],
    ["update t set state = 'commit' where id = $1"],
    ["call apply_order($1)"],
    ["do $$ begin commit; end $$"],
    ["start"],
    ["set local statement_timeout = 0"],
    ["SET LOCAL search_path = other"],
    ["set constraints all deferred"],
    ["savepoint before_insert"],
    ["release savepoint before_insert"],
    ["release before_insert"],
    ["rollback to savepoint before_insert"],
    ["rollback to before_insert"],
    ["rollback /* why */ to before_insert"],
    ["ROLLBACK TRANSACTION TO before_insert"],
    ["rollback work to savepoint before_insert"],
    ["commité"],
    ["commit$x"],
    ['"commit"'],
    ["(select 1)"],
    [""],
  ])("lets %j through", (text) => {
    expect(refusedStatement(text)).toBeUndefined();
  });

  it.each([
    ["begin", "begin"],
    ["BEGIN", "BEGIN"],
    ["begin;", "begin"],
    ["begin transaction isolation level serializable", "begin"],
    ["start transaction", "start transaction"],
    ["Start Transaction read only", "Start Transaction"],
    ["commit", "commit"],
    ["COMMIT AND CHAIN", "COMMIT"],
    ["commit prepared 'p1'", "commit"],
    ["end", "end"],
    ["abort", "abort"],
    ["rollback", "rollback"],
    ["rollback work", "rollback"],
    ["rollback and chain", "rollback"],
    ["rollback prepared 'p1'", "rollback"],
    ["prepare transaction 'inbox-1'", "prepare transaction"],
    // Issue 39, finding 7: a prepared statement, a COPY from the client, a LISTEN outlive the record.
    ["prepare fetch_order as select * from orders where id = $1", "prepare"],
    ["copy orders from stdin", "copy"],
    ["listen orders", "listen"],
    [";commit", "commit"],
    [" ;\n; /* c */ ; -- c\n end", "end"],
    ["set transaction isolation level serializable", "set transaction"],
    ["set session characteristics as transaction read only", "set session characteristics"],
    ["set local transaction isolation level serializable", "set local transaction"],
    ["set session transaction read only", "set session transaction"],
    ["\n   commit  \n", "commit"],
    ["\f\v\tcommit", "commit"],
    ["/* why */ commit", "commit"],
    ["-- why\ncommit", "commit"],
    ["-- why\rcommit", "commit"],
    ["/* outer /* inner */ still a comment */ commit", "commit"],
    ["set default_transaction_read_only = on", "set default_transaction_read_only"],
    ["set search_path = other", "set search_path"],
    ["SET SESSION search_path = other", "SET SESSION search_path"],
    ["set session authorization other", "set session authorization"],
    ["set role other", "set role"],
    ['set "search_path" = other', "set"],
    ["set time zone 'UTC'", "set time"],
    ["reset all", "reset all"],
    ["reset search_path", "reset search_path"],
    ["discard all", "discard all"],
  ])("refuses %j naming %j", (text, words) => {
    expect(refusedStatement(text)?.words).toBe(words);
  });

  it("reads words as Postgres reads identifiers: non-ASCII letters and $ are part of a word", () => {
    expect(leadingWords("select 1 as é$x$", 5)).toEqual(["select"]);
    expect(leadingWords("é$x$ commit", 2)).toEqual(["é$x$", "commit"]);
    expect(leadingWords("  /* a */ rollback -- b\n to  x", 3)).toEqual(["rollback", "to", "x"]);
    expect(leadingWords("/* never closed commit", 1)).toEqual([]);
  });
});

/** A session that records what reached it. */
function recordingSession() {
  const received: unknown[][] = [];
  const session = {
    query: (...args: unknown[]) => {
      received.push(args);
      return Promise.resolve({ rows: [{ ok: 1 }], rowCount: 1 });
    },
  } as unknown as Queryable;
  return { session, received };
}

type AnyQuery = (...args: unknown[]) => Promise<unknown>;

describe("guardClient: context.client", () => {
  it("sends every statement as one config object on the extended protocol, values included, and returns the answer", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    await expect(guard.client.query("select $1::int", [1])).resolves.toEqual({
      rows: [{ ok: 1 }],
      rowCount: 1,
    });
    await guard.client.query("savepoint s");
    expect(received).toEqual([
      [{ text: "select $1::int", values: [1], queryMode: "extended" }],
      [{ text: "savepoint s", values: [], queryMode: "extended" }],
    ]);
    expect(guard.refused()).toBeUndefined();
  });

  it("forces the extended protocol on a config object (a named one too), keeping its other fields", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    const query = guard.client.query as unknown as AnyQuery;
    await query({ text: "select 1", rowMode: "array", queryMode: "simple" });
    await query({ name: "one", text: "select $1", values: [1] });
    await query({ text: "select $1", values: [1] }, [2]);
    expect(received).toEqual([
      [{ text: "select 1", rowMode: "array", values: [], queryMode: "extended" }],
      [{ name: "one", text: "select $1", values: [1], queryMode: "extended" }],
      [{ text: "select $1", values: [2], queryMode: "extended" }],
    ]);
  });

  it("refuses transaction control without sending it, and remembers the first refusal even if caught", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    const commit = guard.client.query("commit");
    await expect(commit).rejects.toThrow(TransactionControlError);
    await expect(commit).rejects.toThrow(/^"commit" on context\.client: transaction control is refused/);
    await guard.client.query("rollback").catch(() => {});
    await guard.client.query("select 1");
    expect(received).toEqual([[{ text: "select 1", values: [], queryMode: "extended" }]]);
    expect(guard.refused()?.message).toMatch(/^"commit"/);
  });

  it("refuses a session-level setting, naming it", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    await expect(guard.client.query("set search_path = other")).rejects.toThrow(
      /^"set search_path" on context\.client: a session-level setting would outlive the record/,
    );
    expect(received).toEqual([]);
  });

  it("refuses the forms it cannot force into one statement: submittables, callbacks, configs without text", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    const query = guard.client.query as unknown as AnyQuery;
    await expect(query({ text: "select 1", submit: () => {} })).rejects.toThrow(/^a submittable/);
    await expect(query("select 1", () => {})).rejects.toThrow(/^a callback on context\.client is refused/);
    await expect(query("select 1", [], () => {})).rejects.toThrow(/^a callback/);
    await expect(query({ name: "x" })).rejects.toThrow(/^a query config without a text/);
    await expect(query(42)).rejects.toThrow(/^a query of type number/);
    await expect(query("select $1", "1")).rejects.toThrow(/^a values argument that is not an array/);
    expect(received).toEqual([]);
    expect(guard.refused()).toBeInstanceOf(TransactionControlError);
  });

  it("refuses everything once closed, and that refusal fails the record too", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    guard.close();
    await expect(guard.client.query("select 1")).rejects.toThrow(
      "context.client was used after its record's handler returned: it belongs to that record's transaction",
    );
    expect(received).toEqual([]);
    expect(guard.refused()).toBeInstanceOf(TransactionControlError);
  });

  it("keeps the first refusal when a later use after close is refused too", async () => {
    const { session } = recordingSession();
    const guard = guardClient(session);
    await guard.client.query("end").catch(() => {});
    guard.close();
    await guard.client.query("select 1").catch(() => {});
    expect(guard.refused()?.message).toMatch(/^"end" on context\.client/);
  });
});
