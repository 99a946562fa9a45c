import { CreateEventBusCommand, EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateStreamCommand, KinesisClient } from "@aws-sdk/client-kinesis";
import { CreateTopicCommand, SNSClient } from "@aws-sdk/client-sns";
import { CreateQueueCommand } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { createDestination } from "../../functions/shared/destinations/create.ts";
import type { Destination } from "../../functions/shared/destinations/destination.ts";
import type { DestinationSetting } from "../../functions/shared/destinations/setting.ts";
import { SNS_MAX_MESSAGE_BYTES } from "../../functions/shared/destinations/sns/sns.ts";
import { SQS_MAX_MESSAGE_BYTES } from "../../functions/shared/destinations/sqs/limits.ts";
import type { TargetSetting } from "../../functions/shared/destinations/targets.ts";
import type { RelayOptions } from "../../functions/shared/relay/engine.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { createBenchQueue, deleteBenchQueue, relayDestination, relaySqsClient } from "./sqsClient.ts";

export type DestinationKind = Destination["kind"];

let places = 0;

/**
 * A fresh place of `kind` on the bench endpoint (a queue, bus, topic or stream per run, so no run sees another's
 * messages) and the relay's destination for it, built by the handler's own destinations/create.ts. `destroy`
 * deletes the queue (the endpoint keeps what it was sent; see sqsClient.ts) and closes the clients.
 */
export async function benchDestination(
  kind: DestinationKind,
  endpoint: string,
  options: RelayOptions,
  label: string,
): Promise<{ destination: Destination; destroy(): Promise<void> }> {
  if (kind === "sqs-fifo") {
    const sqs = relaySqsClient(endpoint, options.publishTimeoutMs);
    const queueUrl = await createBenchQueue(sqs, label);
    const created = await relayDestination(endpoint, queueUrl, options);
    return {
      destination: created.destination,
      async destroy() {
        await deleteBenchQueue(sqs, queueUrl);
        created.destroy();
        sqs.destroy();
      },
    };
  }
  const name = `bench-${label}-${++places}`;
  const admin = { ...LOCAL_AWS, endpoint };
  const target = await createPlace(kind, name, admin);
  // A relay reaches a standard queue, a topic or a stream only through a route table (OUTBOX_ROUTES): one route
  // that matches every event, so the CPU measured includes the router's match, as such a relay's would.
  const setting: DestinationSetting =
    target.kind === "eventbridge" ? target : { kind: "routes", routes: [{ match: {}, destination: target }] };
  const created = await createDestination(setting, {
    sockets: options.concurrency * options.parallelRounds,
    requestTimeoutMs: options.publishTimeoutMs,
    endpoint,
    ...LOCAL_AWS,
  });
  return {
    destination: created.destination,
    async destroy() {
      if (target.kind === "sqs") {
        const sqs = relaySqsClient(endpoint, options.publishTimeoutMs);
        await deleteBenchQueue(sqs, target.queueUrl);
        sqs.destroy();
      }
      created.destroy();
    },
  };
}

async function createPlace(
  kind: Exclude<DestinationKind, "sqs-fifo">,
  name: string,
  admin: typeof LOCAL_AWS & { endpoint: string },
): Promise<TargetSetting> {
  switch (kind) {
    case "sqs": {
      const sqs = relaySqsClient(admin.endpoint, 10_000);
      const { QueueUrl } = await sqs.send(
        new CreateQueueCommand({ QueueName: name, Attributes: { MaximumMessageSize: "1048576" } }),
      );
      sqs.destroy();
      if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
      return { kind, queueUrl: QueueUrl, maxMessageBytes: SQS_MAX_MESSAGE_BYTES };
    }
    case "sns-fifo":
    case "sns": {
      const sns = new SNSClient(admin);
      const { TopicArn } = await sns.send(
        new CreateTopicCommand({ Name: kind === "sns-fifo" ? `${name}.fifo` : name }),
      );
      sns.destroy();
      if (TopicArn === undefined) throw new Error("CreateTopic returned no TopicArn");
      return { kind, topicArn: TopicArn, maxMessageBytes: SNS_MAX_MESSAGE_BYTES };
    }
    case "kinesis": {
      // HTTP/1.1: the client's default HTTP/2 cannot reach the endpoint's plain http (as destinations/create.ts).
      const kinesis = new KinesisClient({ ...admin, requestHandler: new NodeHttpHandler() });
      await kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: 1 }));
      kinesis.destroy();
      return { kind, stream: { streamName: name } };
    }
    case "eventbridge": {
      const events = new EventBridgeClient(admin);
      await events.send(new CreateEventBusCommand({ Name: name }));
      events.destroy();
      return { kind, eventBusName: name, source: "bench" };
    }
    case "routes":
      throw new Error("the bench measures one destination at a time, not a route table");
  }
}
