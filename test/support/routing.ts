import {
  DescribeStreamCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
} from "@aws-sdk/client-kinesis";
import { GetQueueAttributesCommand, type Message, type SQSClient } from "@aws-sdk/client-sqs";
import { expect } from "vitest";

/** What the routing tests read back from queues, topics' subscribers and streams. */

export async function queueArn(sqs: SQSClient, queueUrl: string): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  return Attributes?.QueueArn as string;
}

/** Every record of the stream, shard by shard, in each shard's sequence order, as a consumer reads it. */
export async function readStream(kinesis: KinesisClient, name: string) {
  const { StreamDescription } = await kinesis.send(new DescribeStreamCommand({ StreamName: name }));
  const records: { partitionKey: string; data: Record<string, unknown> }[] = [];
  for (const shard of StreamDescription?.Shards ?? []) {
    const { ShardIterator } = await kinesis.send(
      new GetShardIteratorCommand({
        StreamName: name,
        ShardId: shard.ShardId,
        ShardIteratorType: "TRIM_HORIZON",
      }),
    );
    const { Records = [] } = await kinesis.send(new GetRecordsCommand({ ShardIterator, Limit: 1000 }));
    for (const record of Records) {
      records.push({
        partitionKey: record.PartitionKey as string,
        data: JSON.parse(Buffer.from(record.Data as Uint8Array).toString("utf8")),
      });
    }
  }
  return records;
}

export const attribute = (message: Message, name: string) => message.MessageAttributes?.[name]?.StringValue;

/** The messages' outbox ids, sorted. */
export const ids = (messages: Message[]) => messages.map((message) => attribute(message, "outboxId")).sort();

/** Each group's seq attributes in arrival order are ascending; returns them by group. */
export function expectGroupsInOrder(messages: Message[]) {
  const byGroup = new Map<string, number[]>();
  for (const message of messages) {
    const group = attribute(message, "aggregateId") as string;
    byGroup.set(group, [...(byGroup.get(group) ?? []), Number(attribute(message, "seq"))]);
  }
  for (const [group, seqs] of byGroup) expect(seqs, group).toEqual([...seqs].sort((a, b) => a - b));
  return byGroup;
}
