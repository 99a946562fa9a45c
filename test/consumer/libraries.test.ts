import { PrismaPg } from "@prisma/adapter-pg";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { Kysely, PostgresDialect } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import {
  createInboxHandler,
  type InboxRecordHandler,
  kyselyPoolOf,
  pgClientOf,
  prismaPoolOf,
} from "../../functions/shared/consumer/index.ts";
import { PrismaClient } from "../produce/libraries/prisma/generated/client.ts";
import { CONSUMER_SCHEMA, createConsumerTables, recorder, relayRecord } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";

const db = useTestDatabase();
beforeAll(async () => {
  await createConsumerTables(db.pool);
  // Where the generated Prisma client writes (its model maps to library_orders, in the search_path's schema).
  await db.pool.query("create table public.library_orders (id text primary key, total int not null)");
});

const orders = pgTable("library_orders", {
  id: text("id").primaryKey(),
  total: integer("total").notNull(),
});
interface Database {
  library_orders: { id: string; total: number };
}

const handlers: Record<string, { ok: InboxRecordHandler; fails: InboxRecordHandler }> = {
  drizzle: {
    ok: async (event, context) => {
      await drizzle({ client: pgClientOf(context.client) })
        .insert(orders)
        .values({ id: event.id, total: 1 });
    },
    fails: async (event, context) => {
      const orm = drizzle({ client: pgClientOf(context.client) });
      await orm.insert(orders).values({ id: event.id, total: 1 });
      await orm.execute(sql`rollback`);
    },
  },
  kysely: {
    ok: async (event, context) => {
      const orm = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: kyselyPoolOf(context.client) }),
      });
      await orm.insertInto("library_orders").values({ id: event.id, total: 1 }).execute();
      await orm.destroy();
    },
    fails: async (event, context) => {
      const orm = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: kyselyPoolOf(context.client) }),
      });
      await orm.insertInto("library_orders").values({ id: event.id, total: 1 }).execute();
      await orm.transaction().execute(async () => {});
    },
  },
  prisma: {
    ok: async (event, context) => {
      const prisma = new PrismaClient({ adapter: new PrismaPg(prismaPoolOf(context.client)) });
      await prisma.order.create({ data: { id: event.id, total: 1 } });
    },
    fails: async (event, context) => {
      const prisma = new PrismaClient({ adapter: new PrismaPg(prismaPoolOf(context.client)) });
      await prisma.order.create({ data: { id: event.id, total: 1 } });
      await prisma.$executeRawUnsafe("commit");
    },
  },
};

async function ordersOf(id: string): Promise<number> {
  const { rowCount } = await db.pool.query("select 1 from public.library_orders where id = $1", [id]);
  return rowCount ?? 0;
}

describe.each(Object.entries(handlers))("an inbox handler writing through %s", (library, { ok, fails }) => {
  it("commits its write with the record's inbox row", async () => {
    const log = recorder();
    const handler = createInboxHandler(ok, { pool: db.pool, schema: CONSUMER_SCHEMA, ...log });
    const record = relayRecord({ aggregateId: `${library}-ok`, seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue ?? "";
    expect((await handler({ Records: [record] })).batchItemFailures).toEqual([]);
    expect(await ordersOf(id)).toBe(1);
  });

  it("cannot end the record's transaction: the guard refuses it and nothing is kept", async () => {
    const log = recorder();
    const handler = createInboxHandler(fails, { pool: db.pool, schema: CONSUMER_SCHEMA, ...log });
    const record = relayRecord({ aggregateId: `${library}-fails`, seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue ?? "";
    const result = await handler({ Records: [record] });
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(await ordersOf(id)).toBe(0);
    expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(
      /TransactionControlError|Failed query: rollback/,
    );
  });
});
