import pg from "pg";
import type { Queryable } from "../../functions/shared/db.ts";

/** A session of its own (not from a pool), with its backend pid, so other sessions can see what it waits for. */
export interface Session {
  client: pg.Client;
  pid: number;
}

export async function openSession(url: string): Promise<Session> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>("select pg_backend_pid() as pid");
  return { client, pid: rows[0]?.pid as number };
}

/** Whether backend `pid` is waiting for a lock right now: how a test knows a session blocked, without sleeping. */
export async function waitsOnLock(observer: Queryable, pid: number): Promise<boolean> {
  const { rows } = await observer.query<{ waiting: boolean }>(
    "select exists (select 1 from pg_locks where pid = $1 and not granted) as waiting",
    [pid],
  );
  return rows[0]?.waiting === true;
}
