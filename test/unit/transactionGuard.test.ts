import { describe, expect, it } from "vitest";
import type { Queryable } from "../../functions/shared/consumer/index.ts";
import {
  guardClient,
  TransactionControlError,
  transactionControlIn,
} from "../../functions/shared/consumer/transactionGuard.ts";

/**
 * What the guard classifies today, pinned so that its coming redesign changes it on purpose: each case is the
 * statement text and what transactionControlIn answers (the statement's leading words as written, or undefined).
 */
describe("transactionControlIn: the statements the guard refuses today", () => {
  it.each([
    ["select 1"],
    ["insert into t (word) values ('begin')"],
    ["update t set state = 'commit' where id = $1"],
    ["call apply_order($1)"],
    ["start"],
    ["prepare fetch_order as select * from orders where id = $1"],
    ["set local statement_timeout = 0"],
    ["set search_path = other"],
    ["savepoint before_insert"],
    ["release savepoint before_insert"],
    ["release before_insert"],
    ["rollback to savepoint before_insert"],
    ["rollback to before_insert"],
    ["ROLLBACK TRANSACTION TO before_insert"],
    ["rollback work to savepoint before_insert"],
    [""],
  ])("lets %j through", (text) => {
    expect(transactionControlIn(text)).toBeUndefined();
  });

  it.each([
    ["begin", "begin"],
    ["BEGIN", "BEGIN"],
    ["begin;", "begin"],
    ["begin transaction isolation level serializable", "begin"],
    ["begin work", "begin"],
    ["start transaction", "start transaction"],
    ["Start Transaction read only", "Start Transaction"],
    ["commit", "commit"],
    ["COMMIT AND CHAIN", "COMMIT"],
    ["commit work", "commit"],
    ["end", "end"],
    ["END TRANSACTION", "END"],
    ["abort", "abort"],
    ["rollback", "rollback"],
    ["rollback work", "rollback"],
    ["rollback transaction", "rollback"],
    ["rollback and chain", "rollback"],
    ["prepare transaction 'inbox-1'", "prepare transaction"],
    ["set transaction isolation level serializable", "set transaction"],
    ["set transaction read only", "set transaction"],
    ["set session characteristics as transaction read only", "set session characteristics"],
    ["set local transaction isolation level serializable", "set local transaction"],
    ["set session transaction read only", "set session transaction"],
    ["\n   commit  \n", "commit"],
  ])("refuses %j as %j", (text, refused) => {
    expect(transactionControlIn(text)).toBe(refused);
  });

  it("finds transaction control in any statement of a multi-statement text", () => {
    expect(transactionControlIn("select 1; commit")).toBe("commit");
    expect(transactionControlIn("insert into t values (1);\nrollback;\nselect 2")).toBe("rollback");
    expect(transactionControlIn("select 1; begin; commit")).toBe("begin");
    expect(transactionControlIn("select $1; commit")).toBe("commit");
  });

  it("skips comments, before a statement and around a semicolon", () => {
    expect(transactionControlIn("/* why */ commit")).toBe("commit");
    expect(transactionControlIn("-- why\ncommit")).toBe("commit");
    expect(transactionControlIn("select 1 -- ; commit")).toBeUndefined();
    expect(transactionControlIn("/* ; commit */ select 1")).toBeUndefined();
    expect(transactionControlIn("/* outer /* inner */ ; commit */ select 1")).toBeUndefined();
    expect(transactionControlIn("/* outer /* inner */ still a comment */ commit")).toBe("commit");
  });

  it("does not split inside literals, quoted identifiers or dollar quotes", () => {
    expect(transactionControlIn("select 'a; commit'")).toBeUndefined();
    expect(transactionControlIn("select 'it''s; commit'")).toBeUndefined();
    expect(transactionControlIn('select 1 as "x; commit"')).toBeUndefined();
    expect(transactionControlIn("select $$; commit$$")).toBeUndefined();
    expect(transactionControlIn("select $body$ ; commit; $body$")).toBeUndefined();
    expect(transactionControlIn("do $$ begin commit; end $$")).toBeUndefined();
  });

  it("reads backslash escapes in E'' strings only", () => {
    expect(transactionControlIn("select E'\\'; commit'")).toBeUndefined();
    expect(transactionControlIn("select '\\'; commit")).toBe("commit");
  });

  it("lets a $ inside a word stay a plain character, not a dollar quote", () => {
    expect(transactionControlIn("select a$b$; commit")).toBe("commit");
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

describe("guardClient: context.client", () => {
  it("passes ordinary statements, with their values, through to the session and returns its answer", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    await expect(guard.client.query("select $1::int", [1])).resolves.toEqual({
      rows: [{ ok: 1 }],
      rowCount: 1,
    });
    await guard.client.query("savepoint s");
    expect(received).toEqual([["select $1::int", [1]], ["savepoint s"]]);
    expect(guard.refused()).toBeUndefined();
  });

  it("refuses transaction control without sending it, and remembers the first refusal even if caught", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    const commit = guard.client.query("commit");
    await expect(commit).rejects.toThrow(TransactionControlError);
    await expect(commit).rejects.toThrow(/^"commit" on context\.client: transaction control is refused/);
    await guard.client.query("rollback").catch(() => {});
    await guard.client.query("select 1");
    expect(received).toEqual([["select 1"]]);
    expect(guard.refused()?.message).toMatch(/^"commit"/);
  });

  it("reads the text of a query config object", async () => {
    const { session, received } = recordingSession();
    const guard = guardClient(session);
    const query = guard.client.query as unknown as (config: { text: string }) => Promise<unknown>;
    await expect(query({ text: "begin" })).rejects.toThrow(/^"begin" on context\.client/);
    await query({ text: "select 1" });
    expect(received).toEqual([[{ text: "select 1" }]]);
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
