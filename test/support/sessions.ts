import pg from "pg";
import type { Queryable } from "../../functions/shared/db/session.ts";

/**
 * A connection of its own (not from a pool), with its backend pid, so other sessions can see what it waits for.
 * Behind a transaction pooler (OUTBOX_TEST_POOLER=pgbouncer) a connection is on one backend only for the length
 * of a transaction, so `pid` is read again after every `begin` the test sends: it is the backend of the
 * transaction the test then watches, with or without a pooler.
 */
export interface Session {
  client: pg.Client;
  pid: number;
}

export async function openSession(url: string): Promise<Session> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const backendPid = async () =>
    (await send.call(client, "select pg_backend_pid() as pid")).rows[0]?.pid as number;
  const send = client.query as (this: pg.Client, text: string) => Promise<pg.QueryResult>;
  const session: Session = { client, pid: 0 };
  client.query = (async (...args: [string, ...unknown[]]) => {
    const result = await (send as (...a: unknown[]) => Promise<pg.QueryResult>).apply(client, args);
    if (typeof args[0] === "string" && /^\s*begin\b/i.test(args[0])) session.pid = await backendPid();
    return result;
  }) as typeof client.query;
  session.pid = await backendPid();
  return session;
}

/** Whether backend `pid` is waiting for a lock right now: how a test knows a session blocked, without sleeping. */
export async function waitsOnLock(observer: Queryable, pid: number): Promise<boolean> {
  const { rows } = await observer.query<{ waiting: boolean }>(
    // Not a relation extension lock ('extend'): it is held only while a table or index grows by a page, so a
    // session caught waiting on one is not serialized behind another transaction (a plain INSERT can be, for an
    // instant: seen once in CI on order.test.ts's unguarded race).
    "select exists (select 1 from pg_locks where pid = $1 and not granted and locktype <> 'extend') as waiting",
    [pid],
  );
  return rows[0]?.waiting === true;
}
