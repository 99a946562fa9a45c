import { describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { ValidationError } from "../../functions/shared/outbox/errors.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";

const db = useTestDatabase();
const KIB = 1024;
const payloadOf = (bytes: number) => ({ blob: "x".repeat(bytes) });

async function setLimits(maxMessageBytes: number, limitedBy: string | null, claimCheck = false) {
  await db.pool.query(
    `update ${PRIVATE}.outbox_limits set max_message_bytes = $1, limited_by = $2, claim_check = $3`,
    [maxMessageBytes, limitedBy, claimCheck],
  );
}

async function countRows(): Promise<number> {
  const { rows } = await db.pool.query("select count(*)::int as n from outbox_events");
  return rows[0].n;
}

describe("enqueue checks each event against its destinations' limit (outbox_limits, migration 0015)", () => {
  it("refuses a 300 KiB event bound for a 256 KiB queue at write time, naming the queue's limit", async () => {
    await setLimits(262_144, "sqs-fifo:orders.fifo");
    const before = await countRows();

    const failed = await enqueueCommitted(db.pool, anEvent({ payload: payloadOf(300 * KIB) })).catch(
      (error: unknown) => error,
    );

    expect(failed).toBeInstanceOf(ValidationError);
    expect((failed as ValidationError).field).toBe("event.payload");
    expect((failed as Error).message).toMatch(
      /message would be \d+ bytes .*over the limit of 262144, sqs-fifo:orders\.fifo's limit \(max_message_bytes in outbox_limits\)/,
    );
    expect(await countRows()).toBe(before);
    // The same event fits a 1 MiB queue.
    await setLimits(1_048_576, null);
    await expect(
      enqueueCommitted(db.pool, anEvent({ payload: payloadOf(300 * KIB) })),
    ).resolves.toHaveProperty("id");
  });

  it("takes the 300 KiB event for a 256 KiB queue when the claim check is on (it goes through S3)", async () => {
    await setLimits(262_144, "sqs-fifo:orders.fifo", true);
    try {
      await expect(
        enqueueCommitted(db.pool, anEvent({ payload: payloadOf(300 * KIB) })),
      ).resolves.toHaveProperty("id");
    } finally {
      await setLimits(1_048_576, null);
    }
  });

  it("refuses a whole call for one event that does not fit, leaving the caller's transaction usable", async () => {
    await setLimits(8 * KIB, null);
    try {
      const before = await countRows();
      await withTransaction(db.pool, async (client) => {
        const events = [anEvent(), anEvent({ payload: payloadOf(10 * KIB) }), anEvent()];
        await expect(enqueue(client, events)).rejects.toThrow(
          /events\[1\]\.payload: message would be \d+ bytes .*over the limit of 8192, the destinations' limit/,
        );
        // Nothing failed in the database: the transaction goes on and commits what comes next.
        await enqueue(client, anEvent());
      });
      expect(await countRows()).toBe(before + 1);
    } finally {
      await setLimits(1_048_576, null);
    }
  });

  it("takes the caller's lower maxMessageBytes, and never a higher one over the row's", async () => {
    await setLimits(4 * KIB, null);
    try {
      await expect(
        enqueueCommitted(db.pool, anEvent({ payload: payloadOf(6 * KIB) }), { maxMessageBytes: 1_048_576 }),
      ).rejects.toThrow(/over the limit of 4096, the destinations' limit/);
      await expect(
        enqueueCommitted(db.pool, anEvent({ payload: payloadOf(3 * KIB) }), { maxMessageBytes: 2 * KIB }),
      ).rejects.toThrow(/over the limit of 2048, maxMessageBytes/);
    } finally {
      await setLimits(1_048_576, null);
    }
  });

  it("lets a producer's role read the limits and check against them, never write them", async () => {
    const role = `producer_${Date.now()}`;
    await db.pool.query(`create role ${role} nologin`);
    await db.pool.query(`grant usage on schema public to ${role}; grant insert on outbox_events to ${role}`);
    try {
      // A producer's insert: the gate reads the row (and RETURNING needs SELECT on id and seq, as before).
      await db.pool.query(`grant select (id, seq) on outbox_events to ${role}`);
      const id = await withTransaction(db.pool, async (client) => {
        await client.query(`set local role ${role}`);
        return (await enqueue(client, anEvent())).id;
      });
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const client = await db.pool.connect();
      try {
        await client.query(`set role ${role}`);
        await expect(
          client.query(`select max_message_bytes from ${PRIVATE}.outbox_limits`),
        ).resolves.toBeDefined();
        await expect(
          client.query(`update ${PRIVATE}.outbox_limits set max_message_bytes = 1048576`),
        ).rejects.toMatchObject({
          code: "42501",
        });
        await client.query("reset role");
      } finally {
        client.release();
      }
    } finally {
      await db.pool.query(`drop owned by ${role}; drop role ${role}`);
    }
  });
});
