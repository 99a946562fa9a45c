import { SQSClient } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import {
  claimCheckDestination,
  type PayloadStore,
} from "../../functions/shared/destinations/claimCheck/claimCheck.ts";
import type { LoadedRow, Prepared } from "../../functions/shared/destinations/destination.ts";
import { sqsFifoDestination } from "../../functions/shared/destinations/sqs/sqsFifo.ts";
import { EXTENDED_PAYLOAD_SIZE, POINTER_CLASS } from "../../functions/shared/outbox/payloadPointer.ts";

const sqs = new SQSClient({ region: "eu-west-1" });
const queue = sqsFifoDestination(sqs, { queueUrl: "https://sqs.eu-west-1.amazonaws.com/1/o.fifo" });

function row(payload: string, headers: Record<string, string> = {}): LoadedRow {
  return {
    id: "0b5d8a3c-1111-2222-3333-444455556666",
    seq: "7",
    aggregate_type: "doc",
    aggregate_id: "doc-1",
    event_type: "doc.uploaded",
    attempts: 0,
    transient_failures: 0,
    created_at: new Date(0),
    payload,
    headers,
  };
}

const big = (bytes: number) => JSON.stringify({ blob: "x".repeat(bytes) });

function store(fail?: Error): PayloadStore & { puts: string[] } {
  const puts: string[] = [];
  return {
    bucket: "payloads",
    puts,
    async put(key) {
      if (fail) throw fail;
      puts.push(key);
    },
  };
}

describe("the claim check around a destination", () => {
  it("without it, a message over the queue's limit is refused naming the limit and how to send it through S3", () => {
    expect(queue.prepare(row(big(1_100_000)))).toMatch(
      /over the queue's limit of 1048576 \(larger payloads go through S3 with the claim check: OUTBOX_PAYLOAD_BUCKET/,
    );
  });

  it("sends a payload that does not fit as the Extended Client pointer with ExtendedPayloadSize, and small ones as they are", () => {
    const destination = claimCheckDestination(queue, store(), {
      prefix: "p/",
      maxPayloadBytes: 64 * 1_048_576,
    });
    const payload = big(1_100_000);
    const prepared = destination.prepare(row(payload)) as Prepared<{
      MessageBody: string;
      MessageAttributes: object;
    }>;

    expect(JSON.parse(prepared.message.MessageBody)).toEqual([
      POINTER_CLASS,
      { s3BucketName: "payloads", s3Key: "p/0b5d8a3c-1111-2222-3333-444455556666" },
    ]);
    expect(prepared.message.MessageAttributes).toMatchObject({
      [EXTENDED_PAYLOAD_SIZE]: { DataType: "Number", StringValue: String(Buffer.byteLength(payload)) },
    });
    const small = destination.prepare(row('{"a": 1}')) as Prepared<{ MessageBody: string }>;
    expect(small.message.MessageBody).toBe('{"a":1}');
  });

  it("offloads over the threshold, and refuses over the limit or with no attribute left, naming why", () => {
    const destination = claimCheckDestination(queue, store(), {
      prefix: "",
      thresholdBytes: 100,
      maxPayloadBytes: 2_000,
    });
    const offloaded = destination.prepare(row(big(200))) as Prepared<{ MessageBody: string }>;
    expect(offloaded.message.MessageBody).toContain(POINTER_CLASS);
    expect(destination.prepare(row(big(3_000)))).toMatch(/over the claim check's limit of 2000/);
    expect(destination.prepare(row(big(200), { a: "1", b: "2", c: "3", d: "4" }))).toMatch(
      /headers: has 4 entries; .* leaves room for 3/,
    );
  });

  it("leaves an entry whose upload failed unsent (an outage: never dead-lettered) and does not send its pointer", async () => {
    const destination = claimCheckDestination(queue, store(new Error("connect ECONNREFUSED")), {
      prefix: "",
      maxPayloadBytes: 64 * 1_048_576,
    });
    const prepared = destination.prepare(row(big(1_100_000)));
    if (typeof prepared === "string") throw new Error(prepared);

    const [result] = await destination.send([prepared]);

    expect(result).toMatchObject({
      status: "unsent",
      error: expect.stringMatching(/S3 PutObject .* failed: .*ECONNREFUSED/),
    });
  });
});
