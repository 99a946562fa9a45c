import type { Queryable } from "../db/session.ts";
import { ValidationError } from "../outbox/errors.ts";

/**
 * The transaction handles `enqueue` takes: each data library's handle as the library gives it to the code inside
 * a transaction. Shapes only: nothing here imports a library (a producer's import loads none of them, invariant
 * 12), and each shape names a member only a transaction's handle has where the library's types allow it, so a
 * pool or a root client is a type error where TypeScript can tell and a ValidationError at run time where only
 * the handle's state can.
 */

/** pg's `Client` or `PoolClient` inside `begin` (a client in autocommit is refused), and the inbox's `context.client`. */
export interface PgClientHandle {
  // biome-ignore lint/suspicious/noExplicitAny: pg's own signature; enqueue reads rows of its own statement.
  query(text: string, values?: any[]): Promise<{ rows: any[] }>;
  /** pg 8.16+: the server's last ReadyForQuery status; "I" is idle, outside a transaction. A pg.Pool has none. */
  getTransactionStatus(): string | null;
}

/** postgres.js: the `sql` that `sql.begin(async (sql) => …)` passes (only a transaction's `sql` has `savepoint`). */
export interface PostgresJsTransactionHandle {
  // biome-ignore lint/suspicious/noExplicitAny: postgres.js's parameter type depends on its custom types.
  unsafe(query: string, parameters?: any[]): PromiseLike<readonly object[]>;
  savepoint(...args: never[]): Promise<unknown>;
}

/** Drizzle (node-postgres or postgres.js driver): the `tx` of `db.transaction(async (tx) => …)`; the root `db` has `$client`. */
export interface DrizzleTransactionHandle {
  rollback(): never;
  readonly _: { readonly session: unknown };
  readonly $client?: never;
}

/** Kysely: the `trx` of `db.transaction().execute(async (trx) => …)` (a root Kysely's `isTransaction` is a boolean). */
export interface KyselyTransactionHandle {
  readonly isTransaction: true;
  // biome-ignore lint/suspicious/noExplicitAny: Kysely's compiled query type is generic over the database.
  executeQuery(query: any): Promise<{ rows: unknown[] }>;
}

/** Prisma 6.16+ or 7 with a driver adapter: the `tx` of `prisma.$transaction(async (tx) => …)` (a root client has `$connect`). */
export interface PrismaTransactionHandle {
  // biome-ignore lint/suspicious/noExplicitAny: Prisma's signature.
  $queryRawUnsafe(query: string, ...values: any[]): PromiseLike<unknown>;
  readonly $connect?: never;
}

/** Knex: the `trx` of `knex.transaction(async (trx) => …)` (a root knex has no `isCompleted`). */
export interface KnexTransactionHandle {
  // biome-ignore lint/suspicious/noExplicitAny: Knex's bindings type.
  raw(sql: string, bindings: any): PromiseLike<unknown>;
  isCompleted(): boolean;
}

/** TypeORM: a QueryRunner, in a transaction it started (`startTransaction`). */
export interface TypeOrmQueryRunnerHandle {
  readonly isTransactionActive: boolean;
  // biome-ignore lint/suspicious/noExplicitAny: TypeORM's signature.
  query(query: string, parameters?: any[], useStructuredResult?: boolean): Promise<any>;
  startTransaction(...args: never[]): Promise<void>;
}

/** TypeORM: the `manager` of `dataSource.transaction(async (manager) => …)` (outside one it has no active query runner). */
export interface TypeOrmEntityManagerHandle {
  readonly queryRunner?: TypeOrmQueryRunnerHandle | undefined;
  /** A DataSource has one; an EntityManager does not. */
  readonly manager?: never;
  // biome-ignore lint/suspicious/noExplicitAny: TypeORM's signature.
  query(query: string, parameters?: any[]): Promise<any>;
  transaction(...args: never[]): Promise<unknown>;
}

/** MikroORM 6 or 7 (SQL drivers): the `em` of `em.transactional(async (em) => …)`. */
export interface MikroOrmEntityManagerHandle {
  isInTransaction(): boolean;
  getTransactionContext(): unknown;
}

export type TransactionHandle =
  | PgClientHandle
  | PostgresJsTransactionHandle
  | DrizzleTransactionHandle
  | KyselyTransactionHandle
  | PrismaTransactionHandle
  | KnexTransactionHandle
  | TypeOrmQueryRunnerHandle
  | TypeOrmEntityManagerHandle
  | MikroOrmEntityManagerHandle;

/**
 * `enqueue`'s parameter: the handle itself when it is a transaction's, else a sentence saying what to pass. Without
 * it, tsc measured a pool or a root client against the union's nearest member and said "Property 'transaction' is
 * missing in type 'Pool' … TypeOrmEntityManagerHandle"; with it, it says "Argument of type 'Pool' is not assignable
 * to parameter of type '"a pg.Pool is not a transaction: pass the transaction your library gives you …"'"
 * (test/produce/typeErrors.test.ts pins the text). `H` is inferred from the true branch.
 */
export type TransactionOf<H> = H extends TransactionHandle ? H : NotATransaction<H>;

/** What tsc prints for a handle that is not a transaction's, told apart by the same shapes as statementRunner. */
export type NotATransaction<H> = H extends { totalCount: number; idleCount: number }
  ? Refusal<"a pg.Pool", "with pg, a client of pool.connect() after `begin`">
  : H extends { _: { session: unknown }; select: unknown }
    ? Refusal<"Drizzle's root db", "the tx of db.transaction(async (tx) => …)">
    : H extends { $transaction: unknown; $connect: unknown }
      ? Refusal<"a Prisma client", "the tx of prisma.$transaction(async (tx) => …)">
      : H extends { unsafe: unknown; begin: unknown }
        ? Refusal<"the root postgres.js sql", "the sql of sql.begin(async (sql) => …)">
        : H extends { isTransaction: boolean; executeQuery: unknown }
          ? Refusal<"a root Kysely", "the trx of db.transaction().execute(async (trx) => …)">
          : H extends { raw: unknown; transaction: unknown; client: unknown }
            ? Refusal<"a root knex", "the trx of knex.transaction(async (trx) => …)">
            : H extends { createQueryRunner: unknown; manager: unknown }
              ? Refusal<"a TypeORM DataSource", "the manager of dataSource.transaction(async (manager) => …)">
              : Refusal<"this value", "see docs/libraries.md">;

type Refusal<
  What extends string,
  Instead extends string,
> = `${What} is not a transaction: pass the transaction your library gives you (${Instead})`;

/** Runs one statement written with `$1…$n` placeholders and returns its rows. */
export type RunStatement = (text: string, values: readonly unknown[]) => Promise<readonly Row[]>;

/** `enqueue`'s place in the caller's transaction, from its call until its statement is done. */
export interface JoinedTransaction {
  run: RunStatement;
  /** Lets the transaction end again (see holdPrismaTransaction); call once, when the call settles. */
  leave(): void;
}
type Row = Record<string, unknown>;

// biome-ignore lint/suspicious/noExplicitAny: duck typing reads members the declared shapes do not promise.
type Loose = Record<string | symbol, any>;

/** What marks the client of a Prisma interactive transaction: Prisma 7's scope, Prisma 6's transaction id. */
const PRISMA_TRANSACTION_SCOPE = Symbol.for("prisma.client.transaction.scope_context");
const PRISMA_TRANSACTION_MARKS = [PRISMA_TRANSACTION_SCOPE, Symbol.for("prisma.client.transaction.id")];

/**
 * How to run the insert on `handle`, or a ValidationError (thrown before anything is sent) naming the handle and
 * what to pass instead. Decided by shape, most specific first: a Knex `trx` and a postgres.js `sql` are functions,
 * a TypeORM QueryRunner and a pg client both have `query`. Synchronous: it runs in the caller's tick, before the
 * callback that called `enqueue` can return.
 */
export function joinTransaction(handle: unknown): JoinedTransaction {
  const joined = statementRunner(handle);
  return typeof joined === "function" ? { run: joined, leave: () => {} } : joined;
}

function statementRunner(handle: unknown): RunStatement | JoinedTransaction {
  if (handle === null || (typeof handle !== "object" && typeof handle !== "function")) {
    throw refused(`a ${handle === null ? "null" : typeof handle}`, "pass the transaction's client or handle");
  }
  const h = handle as Loose;
  if (typeof h.raw === "function" && typeof h.transaction === "function" && typeof h.client === "object") {
    if (h.isTransaction !== true) throw refused("a Knex instance", "pass the `trx` of knex.transaction()");
    if (h.isCompleted?.() === true) throw refused("a Knex transaction that has ended", "pass an open `trx`");
    return async (text, values) => {
      const result = (await h.raw(questionMarks(text), [...values])) as { rows: Row[] };
      return result.rows;
    };
  }
  if (typeof h.unsafe === "function") {
    if (typeof h.savepoint !== "function") {
      throw refused(
        "a postgres.js sql outside a transaction",
        "pass the `sql` that sql.begin(async (sql) => …) gives its callback",
      );
    }
    return async (text, values) => (await h.unsafe(text, [...values])) as Row[];
  }
  if (typeof h._ === "object" && h._ !== null && "session" in h._ && typeof h.select === "function") {
    if ("$client" in h || typeof h.rollback !== "function") {
      throw refused(
        "a Drizzle database outside a transaction (or its $client)",
        "pass the `tx` of db.transaction(async (tx) => …)",
      );
    }
    const client = (h._.session as Loose).client as unknown;
    return statementRunner(client);
  }
  if (typeof h.executeQuery === "function" && "isTransaction" in h) {
    if (h.isTransaction !== true) {
      throw refused("a Kysely instance", "pass the `trx` of db.transaction().execute(async (trx) => …)");
    }
    return async (text, values) => {
      const result = (await h.executeQuery(compiledQuery(text, values))) as { rows: Row[] };
      return result.rows;
    };
  }
  if (typeof h.$queryRawUnsafe === "function") {
    // Prisma 7's scope also lets enqueue hold the transaction open (holdPrismaTransaction); Prisma 6 has none.
    const scope = h[PRISMA_TRANSACTION_SCOPE] as Loose | undefined;
    if (PRISMA_TRANSACTION_MARKS.every((mark) => h[mark] === undefined)) {
      throw refused(
        "a Prisma client outside a transaction",
        "pass the `tx` of prisma.$transaction(async (tx) => …)",
      );
    }
    return {
      run: async (text, values) => {
        try {
          return (await h.$queryRawUnsafe(text, ...values)) as Row[];
        } catch (error) {
          throw prismaTransactionEnded(error) ? endedBeforeInsert(error) : error;
        }
      },
      leave: holdPrismaTransaction(scope),
    };
  }
  if (typeof h.isInTransaction === "function" && typeof h.getTransactionContext === "function") {
    const context =
      h.isInTransaction() === true ? (h.getTransactionContext() as Loose | undefined) : undefined;
    // MikroORM 6 runs on Knex: its transaction context is a Knex `trx`. MikroORM 7's is Kysely's.
    if (typeof context?.raw === "function" && context.isTransaction === true) return statementRunner(context);
    if (context === undefined || typeof context.executeQuery !== "function") {
      throw refused(
        "a MikroORM EntityManager outside a transaction",
        "pass the `em` of em.transactional(async (em) => …)",
      );
    }
    return async (text, values) => {
      const result = (await context.executeQuery(compiledQuery(text, values))) as { rows: Row[] };
      return result.rows;
    };
  }
  if (typeof h.startTransaction === "function" && typeof h.isTransactionActive === "boolean") {
    if (!h.isTransactionActive) {
      throw refused(
        "a TypeORM QueryRunner outside a transaction",
        "call queryRunner.startTransaction() first, or pass the manager of dataSource.transaction()",
      );
    }
    return typeOrmRunner(h);
  }
  if (typeof h.createQueryRunner === "function" && typeof h.manager === "object") {
    throw refused("a TypeORM DataSource", "pass the manager of dataSource.transaction(async (manager) => …)");
  }
  if (
    typeof h.transaction === "function" &&
    typeof h.getRepository === "function" &&
    typeof h.query === "function"
  ) {
    const runner = h.queryRunner as Loose | undefined;
    if (runner?.isTransactionActive !== true) {
      throw refused(
        "a TypeORM EntityManager outside a transaction",
        "pass the manager of dataSource.transaction(async (manager) => …)",
      );
    }
    return typeOrmRunner(runner);
  }
  if (typeof h.query === "function") {
    if (typeof h.connect === "function" && typeof h.totalCount === "number") {
      throw refused(
        "a pg.Pool",
        "check a client out (pool.connect()), begin a transaction on it and pass that client",
      );
    }
    if (typeof h.getTransactionStatus === "function" && h.getTransactionStatus() === "I") {
      throw refused(
        "a pg client outside a transaction (it would commit each statement by itself)",
        "run `begin` on it first and pass it, or pass your library's transaction",
      );
    }
    return async (text, values) => {
      const result = (await (h as Queryable).query(text, [...values])) as { rows?: unknown };
      if (!Array.isArray(result?.rows)) {
        throw refused(
          "an object whose query() does not answer as pg's does",
          "pass a pg client or a library's transaction",
        );
      }
      return result.rows as Row[];
    };
  }
  throw refused(
    "an object that is no transaction handle enqueue knows",
    "pass a pg client in a transaction, or a transaction of postgres.js, Drizzle, Kysely, Prisma, Knex, TypeORM or MikroORM",
  );
}

/**
 * Keeps a Prisma transaction from committing while `enqueue`'s insert is on its way. A callback that calls
 * `enqueue(tx, …)` without `await` returns at once, and Prisma commits: measured with Prisma 7.10, the insert then
 * arrives after COMMIT ("Transaction already closed") even when sent in the same tick, so the order was kept and
 * its events lost. Prisma refuses to commit a transaction whose scope stack holds more than itself ("Cannot close
 * transaction while a nested transaction is still active", its nested-transaction check) and rolls it back: an
 * entry there for the length of the call makes the forgotten `await` a failed transaction instead of half of one.
 * A nested `tx.$transaction` would do the same through the public API, but each call would cost a SAVEPOINT and
 * a RELEASE and a subtransaction (past 64 in one transaction Postgres's snapshots slow down on every backend).
 * A Prisma whose scope has no such stack (before 7) is joined without the hold.
 */
function holdPrismaTransaction(scope: Loose | undefined): () => void {
  const stack = (scope?.scopeState as Loose | undefined)?.stack as unknown;
  if (!Array.isArray(stack)) return () => {};
  const entry = `aws-outbox-relay:enqueue:${Math.random().toString(36).slice(2)}`;
  stack.push(entry);
  return () => {
    const at = stack.lastIndexOf(entry);
    if (at >= 0) stack.splice(at, 1);
  };
}

/** Prisma's P2028 "Transaction already closed" (TransactionManagerError), raised by a query after the end. */
function prismaTransactionEnded(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === "P2028" && typeof message === "string" && message.includes("already closed");
}

function endedBeforeInsert(cause: unknown): ValidationError {
  return new ValidationError(
    "db",
    "the transaction ended before enqueue's insert ran, so it was rolled back (a callback that did not await " +
      "enqueue?): await enqueue(tx, …) inside the transaction's callback. Nothing was written",
    { cause },
  );
}

function refused(what: string, instead: string): ValidationError {
  return new ValidationError(
    "db",
    `${what} is not inside a transaction the events can join: ${instead}. Nothing was written`,
  );
}

/** TypeORM's QueryRunner.query returns bare rows for an INSERT; the structured form always has `records`. */
function typeOrmRunner(runner: Loose): RunStatement {
  return async (text, values) => {
    const result = (await runner.query(text, [...values], true)) as { records: Row[] };
    return result.records;
  };
}

/** Knex binds `?`; the statement's `$n` appear in order, once each, and it has no other question mark. */
function questionMarks(text: string): string {
  return text.replace(/\$\d+/g, "?");
}

/** Kysely's CompiledQuery.raw(text, values), built without importing Kysely. */
function compiledQuery(text: string, values: readonly unknown[]) {
  return {
    sql: text,
    parameters: [...values],
    query: { kind: "RawNode", sqlFragments: [text], parameters: [] },
    queryId: { queryId: `outbox-enqueue-${Math.random().toString(36).slice(2)}` },
  };
}
