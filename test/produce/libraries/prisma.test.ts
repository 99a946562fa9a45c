import { PrismaPg } from "@prisma/adapter-pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue } from "../../../functions/shared/produce/enqueue.ts";
import {
  anOrder,
  expectCommitted,
  expectNothing,
  expectNotMigrated,
  expectRefused,
  NOT_MIGRATED,
  Rollback,
  useOrdersDatabase,
} from "./orders.ts";
import { PrismaClient } from "./prisma/generated/client.ts";

// The client is generated from ./prisma/schema.prisma (the `prisma-client` generator, no Rust engine) and
// committed: `prisma generate` wants to download a schema engine it does not use (see docs/libraries.md).
const db = useOrdersDatabase();
let prisma: PrismaClient;
beforeAll(() => {
  prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: db.url, max: 2 }) });
});
afterAll(() => prisma.$disconnect());

describe("enqueue with Prisma and @prisma/adapter-pg", () => {
  it("the tx of prisma.$transaction: commit keeps the order and its events", async () => {
    const order = anOrder();
    const written = await prisma.$transaction(async (tx) => {
      await tx.order.create({ data: { id: order.id, total: order.total } });
      return enqueue(tx, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("rollback drops both", async () => {
    const order = anOrder();
    await expect(
      prisma.$transaction(async (tx) => {
        await tx.order.create({ data: { id: order.id, total: order.total } });
        await enqueue(tx, order.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() => prisma.$transaction((tx) => enqueue(tx, anOrder().events, NOT_MIGRATED)));
  });

  it("an enqueue the callback forgot to await: the transaction fails instead of keeping the order alone", async () => {
    const order = anOrder();
    let pending: Promise<unknown> | undefined;
    const transaction = prisma.$transaction(async (tx) => {
      await tx.order.create({ data: { id: order.id, total: order.total } });
      // The mistake: no await, so the callback returns while the insert is on its way.
      pending = enqueue(tx, order.events);
    });

    await expect(transaction).rejects.toThrow(/nested transaction is still active/);
    await expect(pending).rejects.toThrow(
      /^db: the transaction ended before enqueue's insert ran, so it was rolled back .*await enqueue\(tx, …\)/,
    );
    await expectNothing(db, order.id);
  });

  it("a nested transaction after an awaited enqueue still commits", async () => {
    const order = anOrder();
    const written = await prisma.$transaction(async (tx) => {
      const events = await enqueue(tx, order.events);
      await tx.$transaction((inner) => inner.order.create({ data: { id: order.id, total: order.total } }));
      return events;
    });
    await expectCommitted(db, order, written);
  });

  it("refuses the root client, before writing", async () => {
    const order = anOrder();
    await expectRefused(
      db,
      // @ts-expect-error the root client is not a transaction
      () => enqueue(prisma, order.events),
      /Prisma client outside a transaction.*\$transaction/,
    );
    await expectNothing(db, order.id);
  });
});
