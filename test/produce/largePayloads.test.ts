import { describe, expect, it } from "vitest";
import { ValidationError } from "../../functions/shared/outbox/errors.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";

const db = useTestDatabase();
const MIB = 1_048_576;
const bigPayload = (bytes: number) => ({ blob: "x".repeat(bytes) });

describe("the write API's payload limit (claim check)", () => {
  it("takes a payload over the message limit when the limits row says the claim check is on", async () => {
    const event = anEvent({ payload: bigPayload(5 * MIB) });

    // The row's defaults (migrations 0012, 0015): no claim check, so a message over 1 MiB is refused.
    await expect(enqueueCommitted(db.pool, event)).rejects.toThrow(
      /message would be \d+ bytes .*over the limit of 1048576/,
    );
    // What the construct's largePayloads (or `outbox migrate --claim-check`) writes.
    await db.pool.query(
      `update ${PRIVATE}.outbox_limits set claim_check = true, max_payload_bytes = 67108864`,
    );
    const { id } = await enqueueCommitted(db.pool, event);

    const { rows } = await db.pool.query(
      "select octet_length(payload->>'blob') as bytes, text_bytes_bound from outbox_events where id = $1",
      [id],
    );
    expect(rows[0]).toMatchObject({ bytes: 5 * MIB });
    expect(rows[0].text_bytes_bound).toBeGreaterThan(5 * MIB);
    await db.pool.query(
      `update ${PRIVATE}.outbox_limits set claim_check = false, max_payload_bytes = 1048576`,
    );
  });

  it("refuses, naming the field, the limit and where it lives, a payload over the row's max_payload_bytes", async () => {
    await db.pool.query(
      `update ${PRIVATE}.outbox_limits set claim_check = true, max_payload_bytes = 2097152`,
    );
    try {
      const attempt = enqueueCommitted(db.pool, anEvent({ payload: bigPayload(2 * MIB) }));
      await expect(attempt).rejects.toThrow(ValidationError);
      await expect(attempt).rejects.toThrow(
        /event\.payload: is \d+ bytes of JSON, over the claim check's limit of 2097152 \(max_payload_bytes in outbox_limits\)/,
      );
    } finally {
      await db.pool.query(
        `update ${PRIVATE}.outbox_limits set claim_check = false, max_payload_bytes = 1048576`,
      );
    }
  });

  it("still honours the deprecated maxPayloadBytes option, below the row's limit", async () => {
    // The option turns the claim check on for the call; the row's 1 MiB payload limit still bounds it.
    await expect(
      enqueueCommitted(db.pool, anEvent({ payload: bigPayload(5 * MIB) }), { maxPayloadBytes: 64 * MIB }),
    ).rejects.toThrow(/over the claim check's limit of 1048576 \(max_payload_bytes in outbox_limits\)/);
    await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = 67108864`);
    try {
      await expect(
        enqueueCommitted(db.pool, anEvent({ payload: bigPayload(3 * MIB) }), { maxPayloadBytes: 2 * MIB }),
      ).rejects.toThrow(/over the claim check's limit of 2097152 \(maxPayloadBytes\)/);
      await expect(
        enqueueCommitted(db.pool, anEvent({ payload: bigPayload(5 * MIB) }), { maxPayloadBytes: 64 * MIB }),
      ).resolves.toHaveProperty("id");
    } finally {
      await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = 1048576`);
    }
  });

  it("keeps one attribute free for ExtendedPayloadSize on a payload that goes through S3", async () => {
    const headers = { a: "1", b: "2", c: "3", d: "4" };
    const attempt = enqueueCommitted(db.pool, anEvent({ payload: bigPayload(2 * MIB), headers }), {
      maxPayloadBytes: 64 * MIB,
    });
    await expect(attempt).rejects.toThrow(/event\.headers: has 4 entries; .* leaves room for 3/);
  });

  it("refuses a maxPayloadBytes over 64 MiB, naming the option", async () => {
    await expect(enqueueCommitted(db.pool, anEvent(), { maxPayloadBytes: 64 * MIB + 1 })).rejects.toThrow(
      /options\.maxPayloadBytes: must be an integer from 1024 to 67108864/,
    );
  });

  it("without the claim check refuses, naming how to send larger payloads", async () => {
    await expect(enqueueCommitted(db.pool, anEvent({ payload: bigPayload(2 * MIB) }))).rejects.toThrow(
      /over the limit of 1048576, .*\(larger payloads: the claim check, docs\/large-payloads\.md\)/,
    );
  });
});
