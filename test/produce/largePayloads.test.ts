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
  it("takes a payload over the message limit with maxPayloadBytes, once the table's limit is raised", async () => {
    const event = anEvent({ payload: bigPayload(5 * MIB) });

    // The table's limit (migration 0012) is 1 MiB until its owner raises it: the trigger names where it lives.
    await expect(enqueueCommitted(db.pool, event, { maxPayloadBytes: 64 * MIB })).rejects.toThrow(
      /outbox payload: its JSON text is \d+ bytes, over 1572864 \(the text of max_payload_bytes 1048576 in "outbox_private:public\.outbox_events"\."outbox_limits"\)/,
    );
    await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = 67108864`);
    const { id } = await enqueueCommitted(db.pool, event, { maxPayloadBytes: 64 * MIB });

    const { rows } = await db.pool.query(
      "select octet_length(payload->>'blob') as bytes, text_bytes_bound from outbox_events where id = $1",
      [id],
    );
    expect(rows[0]).toMatchObject({ bytes: 5 * MIB });
    expect(rows[0].text_bytes_bound).toBeGreaterThan(5 * MIB);
  });

  it("refuses, naming the field and the limit, a payload over maxPayloadBytes", async () => {
    const attempt = enqueueCommitted(db.pool, anEvent({ payload: bigPayload(2 * MIB) }), {
      maxPayloadBytes: 2 * MIB,
    });
    await expect(attempt).rejects.toThrow(ValidationError);
    await expect(attempt).rejects.toThrow(
      /event\.payload: is \d+ bytes of JSON, over the claim check's limit of 2097152 \(maxPayloadBytes\)/,
    );
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

  it("without maxPayloadBytes refuses as before, naming how to send larger payloads", async () => {
    await expect(enqueueCommitted(db.pool, anEvent({ payload: bigPayload(2 * MIB) }))).rejects.toThrow(
      /over the limit of 1048576 \(larger payloads: the claim check, maxPayloadBytes/,
    );
  });
});
