/**
 * A type test (issue 32): compiled by `npm run typecheck` (tsc --noEmit), never run. Each accepted line is what a
 * user of that library writes inside its transaction, with no cast or wrapper; each `@ts-expect-error` is a
 * handle that is not in a transaction (or no handle at all), which the types refuse; its text is the start of the
 * sentence tsc reports, which typeErrors.test.ts checks. Imports the package's root entry as a producer does.
 */
import type { EntityManager as MikroEntityManager } from "@mikro-orm/postgresql";
import type { NodePgDatabase } from "drizzle-orm/node-postgres";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import type { Knex } from "knex";
import type { Kysely, Transaction } from "kysely";
import type pg from "pg";
import type postgres from "postgres";
import type { DataSource, EntityManager, QueryRunner } from "typeorm";
import { enqueue, type OutboxEvent } from "../../functions/shared/index.ts";
import type { PrismaClient } from "./libraries/prisma/generated/client.ts";

declare const event: OutboxEvent<{ id: string }>;
declare const events: readonly OutboxEvent<{ id: string }>[];

// pg: a Client or PoolClient (whether it ran `begin` is checked at run time); never a Pool.
declare const client: pg.Client;
declare const poolClient: pg.PoolClient;
declare const pool: pg.Pool;
export const a1 = enqueue(client, event);
export const a2 = enqueue(poolClient, events);
// @ts-expect-error a pg.Pool is not a transaction
enqueue(pool, event);

// postgres.js: the callback's sql of sql.begin; never the root sql.
declare const sql: postgres.Sql;
export const b1 = sql.begin((tx) => enqueue(tx, events));
// @ts-expect-error the root postgres.js sql is not a transaction
enqueue(sql, event);

// Drizzle, both drivers: the tx of db.transaction; never the root db.
// As drizzle() returns it, with its client.
declare const drizzlePg: NodePgDatabase & { $client: pg.Pool };
declare const drizzlePostgresJs: PostgresJsDatabase;
export const c1 = drizzlePg.transaction((tx) => enqueue(tx, event));
export const c2 = drizzlePostgresJs.transaction((tx) => enqueue(tx, events));
// @ts-expect-error Drizzle's root db is not a transaction
enqueue(drizzlePg, event);
// neither is its $client (a pg.Pool here)
// @ts-expect-error a pg.Pool is not a transaction
enqueue(drizzlePg.$client, event);
// @ts-expect-error Drizzle's root db is not a transaction
enqueue(drizzlePostgresJs, event);

// Kysely: the trx of db.transaction().execute; never the root Kysely.
declare const kysely: Kysely<{ orders: { id: string } }>;
declare const trx: Transaction<{ orders: { id: string } }>;
export const d1 = kysely.transaction().execute((t) => enqueue(t, event));
export const d2 = enqueue(trx, events);
// @ts-expect-error a root Kysely is not a transaction
enqueue(kysely, event);

// Prisma 7 with a driver adapter: the tx of $transaction; never the root client.
declare const prisma: PrismaClient;
export const e1 = prisma.$transaction((tx) => enqueue(tx, event));
// @ts-expect-error a Prisma client is not a transaction
enqueue(prisma, event);

// Knex: the trx of knex.transaction; never the root knex.
declare const knex: Knex;
export const f1 = knex.transaction((t) => enqueue(t, events));
// @ts-expect-error a root knex is not a transaction
enqueue(knex, event);

// TypeORM: a manager or a QueryRunner (in a transaction: checked at run time); never the DataSource.
declare const dataSource: DataSource;
declare const manager: EntityManager;
declare const runner: QueryRunner;
export const g1 = dataSource.transaction((m) => enqueue(m, event));
export const g2 = enqueue(manager, event);
export const g3 = enqueue(runner, events);
// @ts-expect-error a TypeORM DataSource is not a transaction
enqueue(dataSource, event);

// MikroORM: the em of em.transactional (in a transaction: checked at run time).
declare const em: MikroEntityManager;
export const h1 = em.transactional((inner) => enqueue(inner, event));

// What the old `Queryable` let through: anything with a generic query(), a readonly-values mismatch, a string.
declare const anyQuery: { query<T>(text: string, values?: unknown[]): Promise<T> };
// a query() alone is not a known transaction handle
// @ts-expect-error this value is not a transaction
enqueue(anyQuery, event);
// a connection string is no handle
// @ts-expect-error this value is not a transaction
enqueue("postgres://localhost/app", event);
