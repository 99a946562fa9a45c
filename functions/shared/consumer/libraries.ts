import pg from "pg";
import type { Queryable } from "../db/session.ts";

/**
 * `context.client` in the shapes the data libraries take, so a handler writes through Drizzle, Kysely or Prisma
 * inside the record's transaction with no cast. Each one hands the library the guarded client itself: every
 * statement still goes through the transaction guard (transactionGuard.ts), so a library's `begin`, `commit` or
 * `rollback` is refused as the handler's own would be. None opens a connection or ends one.
 */
export interface InboxClient extends Queryable {
  /** Always inside the record's transaction ("T"): what tells `enqueue` it may join it. */
  getTransactionStatus(): "T";
}

/**
 * For Drizzle's node-postgres driver: `drizzle({ client: pgClientOf(context.client) })`. Typed as pg's
 * PoolClient because that is what Drizzle accepts; only `query` is there (Drizzle uses nothing else on a client
 * that is not a pool), and `db.transaction()` on it is refused (it sends `begin`).
 */
export function pgClientOf(client: InboxClient): pg.PoolClient {
  return client as unknown as pg.PoolClient;
}

/** What Kysely's PostgresDialect takes as `pool` (kysely's PostgresPool), declared here without importing Kysely. */
export interface OneSessionPool {
  connect(): Promise<{
    // biome-ignore lint/suspicious/noExplicitAny: Kysely's two query overloads (text and a cursor) in one.
    query(...args: any[]): any;
    release(): void;
  }>;
  end(): Promise<void>;
  /** Kysely 0.29 reads the pool's settings from here; a one-session pool has none. */
  readonly options: object;
}

/**
 * For Kysely: `new Kysely<DB>({ dialect: new PostgresDialect({ pool: kyselyPoolOf(context.client) }) })`. A pool
 * of the record's one session: every connection Kysely asks for is it, releasing it and `destroy()` do nothing.
 * Cursors (`.stream()`) are refused by the guard.
 */
export function kyselyPoolOf(client: InboxClient): OneSessionPool {
  const session = {
    query: (text: unknown, values?: unknown) =>
      typeof text === "string" && values !== undefined
        ? client.query(text, [...(values as readonly unknown[])])
        : (client.query as (...args: unknown[]) => unknown)(text, values),
    release: () => {},
  };
  return { connect: async () => session, end: async () => {}, options: {} };
}

/**
 * For Prisma 7's `@prisma/adapter-pg`, which takes only a `pg.Pool`:
 * `new PrismaClient({ adapter: new PrismaPg(prismaPoolOf(context.client)) })`. A pg.Pool whose every query and
 * session is the record's; it never connects, and `end()` does nothing. Prisma's own transactions
 * (`$transaction`, and the one a nested write opens) send `BEGIN` and are refused: write with single operations.
 */
export function prismaPoolOf(client: InboxClient): pg.Pool {
  return new OneSessionPgPool(client);
}

class OneSessionPgPool extends pg.Pool {
  readonly #client: InboxClient;
  constructor(client: InboxClient) {
    super({ max: 1 });
    this.#client = client;
  }
  // biome-ignore lint/suspicious/noExplicitAny: pg.Pool's overloads, all sent to the guarded client.
  override query(...args: any[]): any {
    return (this.#client.query as (...forwarded: unknown[]) => unknown)(...args);
  }
  // biome-ignore lint/suspicious/noExplicitAny: pg.Pool's overloads.
  override connect(): any {
    const client = this.#client;
    return Promise.resolve({
      query: (...args: unknown[]) => (client.query as (...forwarded: unknown[]) => unknown)(...args),
      release: () => {},
      on: () => {},
      off: () => {},
      removeListener: () => {},
    });
  }
  // biome-ignore lint/suspicious/noExplicitAny: pg.Pool's overloads.
  override end(): any {
    return Promise.resolve();
  }
}
