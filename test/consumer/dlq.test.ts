import { randomBytes } from "node:crypto";
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import { createInboxHandler } from "../../functions/shared/consumer/index.ts";
import { CONSUMER_SCHEMA, createConsumerTables, effects, outboxIdOf, recorder } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const MAX_RECEIVE_COUNT = 2;

/** A FIFO queue with a real redrive policy to a FIFO dead-letter queue (moto moves messages; the fake does not). */
async function queueWithDeadLetterQueue(sqs: SQSClient) {
  const suffix = randomBytes(4).toString("hex");
  const create = async (name: string, attributes: Record<string, string> = {}) => {
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({
        QueueName: `${name}-${suffix}.fifo`,
        Attributes: { FifoQueue: "true", VisibilityTimeout: "30", ...attributes },
      }),
    );
    if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
    return QueueUrl;
  };
  const dlqUrl = await create("inbox-dlq");
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ["QueueArn"] }),
  );
  const queueUrl = await create("inbox-poison", {
    RedrivePolicy: JSON.stringify({
      deadLetterTargetArn: Attributes?.QueueArn,
      maxReceiveCount: MAX_RECEIVE_COUNT,
    }),
  });
  return { queueUrl, dlqUrl };
}

describe("a poison message", () => {
  // What SQS does, and what this shows on moto's real redrive policy: the records behind the poison in its
  // group are received in the same batches (and failed unprocessed), so their receive count grows with the
  // poison's and they reach the dead-letter queue with it, in order. An event of the group that was not yet
  // received then flows. docs/consumer.md tells operators; a batch size of 1 avoids it.
  it("goes to the dead-letter queue after maxReceiveCount, with its group's tail, while other groups flow", async () => {
    const sqs = sqsClient();
    const { queueUrl, dlqUrl } = await queueWithDeadLetterQueue(sqs);
    await createConsumerTables(db.pool);
    const publish = async (events: ReturnType<typeof anEvent>[]) => {
      const written = await enqueueCommitted(db.pool, events);
      await drain(db.pool, sqs, testRelayOptions(queueUrl));
      return written.map((row) => row.id);
    };
    const [poison, behindPoison, healthy1, healthy2] = await publish([
      anEvent({ aggregateId: "order-poison", eventType: "order.poison" }),
      anEvent({ aggregateId: "order-poison" }),
      anEvent({ aggregateId: "order-healthy" }),
      anEvent({ aggregateId: "order-healthy" }),
    ]);
    const log = recorder();
    const handler = createInboxHandler(
      async (event, { client }) => {
        if (event.eventType === "order.poison") throw new Error("cannot apply this event");
        await client.query(
          `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
          [event.id, event.aggregateId, event.eventType],
        );
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );

    // First delivery: the poison fails and holds back its group; the healthy group is applied at once.
    const first = await pollOnce(sqs, queueUrl, handler, { retryFailedAfterSeconds: 0 });
    expect(first.messages.map(outboxIdOf).sort()).toEqual([poison, behindPoison, healthy1, healthy2].sort());
    expect(first.failed).toBe(2);
    expect((await effects(db.pool)).sort()).toEqual([healthy1, healthy2].sort());
    const [later] = await publish([anEvent({ aggregateId: "order-poison" })]);

    // Redeliveries until SQS gives up on the poison and the group's next event comes through.
    for (let poll = 0; poll < 10 && !(await effects(db.pool)).includes(later ?? ""); poll++) {
      await pollOnce(sqs, queueUrl, handler, { retryFailedAfterSeconds: 0 });
    }

    const applied = await effects(db.pool);
    expect(applied).toEqual(expect.arrayContaining([healthy1, healthy2, later]));
    expect(applied).not.toContain(poison);
    const parked = await receiveAll(sqs, dlqUrl, 2, 5_000);
    expect(parked.map(outboxIdOf)).toEqual([poison, behindPoison]);
    const poisonFailures = log.outcomes.filter(
      (outcome) => outcome.status === "failed" && outcome.event?.id === poison,
    );
    expect(poisonFailures).toHaveLength(MAX_RECEIVE_COUNT);
  });
});
