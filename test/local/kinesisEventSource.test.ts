import { randomBytes } from "node:crypto";
import type { KinesisClient } from "@aws-sdk/client-kinesis";
import { CreateStreamCommand, DescribeStreamSummaryCommand, PutRecordCommand } from "@aws-sdk/client-kinesis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { KinesisEventSource } from "../../cli/dev/aws/kinesisEventSource.ts";
import { kinesisClient } from "../../cli/dev/destinations.ts";
import type { InboxStreamHandler, KinesisEvent } from "../../functions/shared/consumer/index.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

let kinesis: KinesisClient;

async function aStreamWith(records: { key: string; data: string }[]) {
  const streamName = `event-source-${randomBytes(3).toString("hex")}`;
  await kinesis.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: 1 }));
  const { StreamDescriptionSummary } = await kinesis.send(
    new DescribeStreamSummaryCommand({ StreamName: streamName }),
  );
  const sequenceNumbers: string[] = [];
  // One at a time: each PutRecord's sequence number is the one the records are read back with.
  for (const { key, data } of records) {
    const { SequenceNumber } = await kinesis.send(
      new PutRecordCommand({ StreamName: streamName, PartitionKey: key, Data: Buffer.from(data) }),
    );
    sequenceNumbers.push(SequenceNumber as string);
  }
  return { streamName, streamArn: StreamDescriptionSummary?.StreamARN as string, sequenceNumbers };
}

/** A handler that answers each call with the next scripted list of failed sequence numbers. */
function scripted(failures: string[][]) {
  const calls: KinesisEvent[] = [];
  const handler: InboxStreamHandler = async (event) => {
    calls.push(event);
    return {
      batchItemFailures: (failures[calls.length - 1] ?? []).map((itemIdentifier) => ({ itemIdentifier })),
    };
  };
  return { handler, calls };
}

const dataOf = (event: KinesisEvent | undefined) =>
  event?.Records.map((record) => Buffer.from(record.kinesis.data, "base64").toString()) ?? [];

/** The harness's endpoint (moto) and the in-process one `outbox dev` reads its streams from. */
describe.each(["reference", "in-process"])(
  "KinesisEventSource (the demo's Kinesis event source) on the %s endpoint",
  (which) => {
    let local: FakeSqs | undefined;
    beforeAll(async () => {
      if (which === "in-process") local = await startFakeSqs();
      kinesis = kinesisClient({ ...LOCAL_AWS, endpoint: local?.url ?? inject("awsEndpoint") });
    });
    afterAll(async () => {
      kinesis.destroy();
      await local?.close();
    });

    it("hands a shard's records over in order as a Kinesis event, then reads on after them", async () => {
      const stream = await aStreamWith([
        { key: "a", data: "a1" },
        { key: "b", data: "b1" },
      ]);
      const source = new KinesisEventSource(kinesis, stream);
      const { handler, calls } = scripted([]);

      const first = await source.pollOnce(handler);
      const second = await source.pollOnce(handler);

      expect(first).toEqual({ received: 2, failed: 0 });
      expect(dataOf(calls[0])).toEqual(["a1", "b1"]);
      expect(calls[0]?.Records.map((record) => record.kinesis.partitionKey)).toEqual(["a", "b"]);
      expect(calls[0]?.Records.map((record) => record.kinesis.sequenceNumber)).toEqual(
        stream.sequenceNumbers,
      );
      expect(calls[0]?.Records[0]?.eventSourceARN).toBe(stream.streamArn);
      expect(calls[0]?.Records[0]?.eventSource).toBe("aws:kinesis");
      expect(second).toEqual({ received: 0, failed: 0 });
      expect(calls).toHaveLength(1);
    });

    it("resumes the shard from the lowest sequence number reported failed: it and every later record come again", async () => {
      const stream = await aStreamWith([
        { key: "a", data: "a1" },
        { key: "b", data: "b1" },
        { key: "a", data: "a2" },
        { key: "c", data: "c1" },
      ]);
      const [, b1, a2] = stream.sequenceNumbers;
      const source = new KinesisEventSource(kinesis, stream);
      // b1 failed; a2 is listed too (out of order in the response): the lowest, b1, is where the shard resumes.
      const { handler, calls } = scripted([[a2 as string, b1 as string], []]);

      const failed = await source.pollOnce(handler);
      const retried = await source.pollOnce(handler);
      const after = await source.pollOnce(handler);

      expect(failed).toEqual({ received: 4, failed: 2 });
      expect(retried).toEqual({ received: 3, failed: 0 });
      expect(dataOf(calls[1])).toEqual(["b1", "a2", "c1"]);
      expect(after).toEqual({ received: 0, failed: 0 });
    });
  },
);
