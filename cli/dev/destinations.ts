/**
 * Where `outbox dev --destination <kind>` and `npm start -- --destination <kind>` publish, and what their consumer
 * reads: one resource set per kind, created on the local endpoint. The kinds are the route table's
 * (docs/routing.md), so a reader can copy the relay's OUTBOX_ROUTES; `sqs-fifo` uses the relay's single-queue
 * setting (OUTBOX_QUEUE_URL).
 *
 * - `sns-fifo` / `sns`: a topic and one queue of the same kind subscribed with raw message delivery, so the
 *   consumer receives what the SQS destination would send (attributes as SQS message attributes; without raw
 *   delivery SNS wraps it in its JSON notification, which the inbox reads too). Amazon SNS Developer Guide,
 *   "Amazon SNS raw message delivery"; a FIFO topic delivers only to FIFO queues ("Message ordering details for
 *   FIFO topics").
 * - `kinesis`: a one-shard stream the consumer polls as Lambda's event source mapping does.
 * - `eventbridge`: a bus, a rule matching the relay's source, a standard queue as its target.
 */
import { randomBytes } from "node:crypto";
import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  DeleteRuleCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateStreamCommand,
  DeleteStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
} from "@aws-sdk/client-kinesis";
import { CreateTopicCommand, DeleteTopicCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import type { TargetSetting } from "../../functions/shared/destinations/targets.ts";

/** `--destination`'s choices, named as OUTBOX_ROUTES names the kinds. */
export const LOCAL_DESTINATIONS = ["sqs-fifo", "sqs", "sns-fifo", "sns", "kinesis", "eventbridge"] as const;
export type LocalDestination = (typeof LOCAL_DESTINATIONS)[number];

/** The kinds that keep each order's events in order end to end (per message group, per partition key). */
export function keepsOrder(destination: LocalDestination): boolean {
  return destination === "sqs-fifo" || destination === "sns-fifo" || destination === "kinesis";
}

/** What does not order, as the summary names it when it reports late arrivals as information. */
export function unorderedBy(destination: LocalDestination): string {
  if (destination === "eventbridge") return "the bus";
  return destination === "sns" ? "a standard topic" : "a standard queue";
}

/** What the consumer reads: a queue (SQS event source) or a stream (Kinesis event source). */
export type ConsumerSource = { queueUrl: string } | { streamName: string; streamArn: string };

export interface LocalTarget {
  consumerSource: ConsumerSource;
  /** The relay's destination settings: exactly the variables this kind needs, the others unset. */
  relayEnv: Record<string, string | undefined>;
  /** Relay settings this kind needs on an emulator, unless the environment sets them. */
  relayDefaults?: Record<string, string>;
  /** For the set-up line, after the endpoint: `queue: <url>`, `topic: <arn> -> queue: <url>`, ... */
  resources: string;
  /** The resources' addresses as environment variables for the app (`outbox dev`'s .outbox/dev.env). */
  addresses: Record<string, string>;
  /** For the header: the path from the relay to the consumer. */
  path: string;
  remove(): Promise<void>;
}

export interface TargetClients {
  sqs: SQSClient;
  config: {
    region?: string;
    credentials?: { accessKeyId: string; secretAccessKey: string };
    endpoint?: string;
  };
  /** The events' source on a bus, which its rule matches. */
  eventSource: string;
  /** Names the resources: a fresh name per run for the demo, a stable one for `outbox dev`. */
  name(): string;
  /**
   * The consumer's queue's visibility timeout, seconds: how long a record its handler failed stays invisible
   * before it is delivered again.
   */
  visibilityTimeoutSeconds: number;
}

/**
 * Kinesis's client defaults to HTTP/2 (for SubscribeToShard), which cannot reach an emulator over plain http;
 * the calls here are ordinary requests, sent over HTTP/1.1 (as the relay does, destinations/create.ts).
 */
export function kinesisClient(config: TargetClients["config"]): KinesisClient {
  return new KinesisClient({ ...config, requestHandler: new NodeHttpHandler({}) });
}

const NO_DESTINATION = { OUTBOX_QUEUE_URL: undefined, OUTBOX_EVENT_BUS_NAME: undefined };

/** One catch-all route to `destination`: every event of the demo's outbox goes there. */
function routeEverything(destination: Record<string, string>): Record<string, string | undefined> {
  return { ...NO_DESTINATION, OUTBOX_ROUTES: JSON.stringify([{ match: {}, destination }]) };
}

export async function createTarget(kind: LocalDestination, clients: TargetClients): Promise<LocalTarget> {
  const { sqs } = clients;
  const fifo = kind === "sqs-fifo" || kind === "sns-fifo";
  if (kind === "kinesis") return createStream(kinesisClient(clients.config), clients.name());
  const queueUrl = await createQueue(sqs, fifo ? "fifo" : "standard", clients);
  const removeQueue = async () => {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => {});
  };
  const consumerSource = { queueUrl };
  switch (kind) {
    case "sqs-fifo":
      return {
        consumerSource,
        relayEnv: { ...NO_DESTINATION, OUTBOX_QUEUE_URL: queueUrl },
        resources: `queue: ${queueUrl}`,
        addresses: { OUTBOX_DEV_QUEUE_URL: queueUrl },
        path: "SQS FIFO",
        remove: removeQueue,
      };
    case "sqs":
      return {
        consumerSource,
        relayEnv: routeEverything({ kind: "sqs", queueUrl }),
        resources: `standard queue: ${queueUrl}`,
        addresses: { OUTBOX_DEV_QUEUE_URL: queueUrl },
        path: "SQS standard queue",
        remove: removeQueue,
      };
    case "sns-fifo":
    case "sns": {
      const sns = new SNSClient(clients.config);
      const topicArn = await createTopicToQueue(sns, sqs, queueUrl, fifo, clients.name());
      return {
        consumerSource,
        relayEnv: routeEverything({ kind, topicArn }),
        resources: `topic: ${topicArn} -> raw delivery -> queue: ${queueUrl}`,
        addresses: { OUTBOX_DEV_TOPIC_ARN: topicArn, OUTBOX_DEV_QUEUE_URL: queueUrl },
        path: `SNS ${fifo ? "FIFO " : ""}topic -> ${fifo ? "SQS FIFO" : "SQS"} queue`,
        async remove() {
          await sns.send(new DeleteTopicCommand({ TopicArn: topicArn })).catch(() => {});
          sns.destroy();
          await removeQueue();
        },
      };
    }
    case "eventbridge": {
      const events = new EventBridgeClient(clients.config);
      const source = clients.eventSource;
      const route = await createBus(events, source, await queueArn(sqs, queueUrl), clients.name());
      return {
        consumerSource,
        relayEnv: { ...NO_DESTINATION, OUTBOX_EVENT_BUS_NAME: route.busName, OUTBOX_EVENT_SOURCE: source },
        resources: `bus: ${route.busName}  rule: source=${source}  target queue: ${queueUrl}`,
        addresses: { OUTBOX_DEV_EVENT_BUS_NAME: route.busName, OUTBOX_DEV_QUEUE_URL: queueUrl },
        path: `EventBridge bus ${route.busName} -> rule -> SQS queue`,
        async remove() {
          await route.remove().catch(() => {});
          events.destroy();
          await removeQueue();
        },
      };
    }
  }
}

/**
 * A FIFO queue that takes what the relay sends: 1 MiB messages (the attribute still defaults to 256 KiB). For a
 * bus, a standard queue as the rule's target: a FIFO target would add nothing, the bus having no order to keep.
 */
async function createQueue(
  sqs: SQSClient,
  kind: "fifo" | "standard",
  clients: Pick<TargetClients, "name" | "visibilityTimeoutSeconds">,
): Promise<string> {
  const name = clients.name();
  const attributes = {
    MaximumMessageSize: "1048576",
    VisibilityTimeout: String(clients.visibilityTimeoutSeconds),
  };
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand(
      kind === "fifo"
        ? { QueueName: `${name}.fifo`, Attributes: { ...attributes, FifoQueue: "true" } }
        : { QueueName: name, Attributes: attributes },
    ),
  );
  if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
  return QueueUrl;
}

/** A fresh name per run (`npm start`): runs against one LocalStack do not share queues. */
export const freshName = () => `outbox-demo-${randomBytes(3).toString("hex")}`;

async function queueArn(sqs: SQSClient, queueUrl: string): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  if (Attributes?.QueueArn === undefined)
    throw new Error(`GetQueueAttributes returned no QueueArn for ${queueUrl}`);
  return Attributes.QueueArn;
}

/**
 * A topic with the consumer's queue subscribed, raw message delivery on. (On AWS the queue's policy must also let
 * sns.amazonaws.com send to it; the emulators do not check, and these never run against a real account.)
 */
async function createTopicToQueue(
  sns: SNSClient,
  sqs: SQSClient,
  queueUrl: string,
  fifo: boolean,
  name: string,
): Promise<string> {
  const { TopicArn } = await sns.send(
    new CreateTopicCommand(
      fifo ? { Name: `${name}.fifo`, Attributes: { FifoTopic: "true" } } : { Name: name },
    ),
  );
  if (TopicArn === undefined) throw new Error("CreateTopic returned no TopicArn");
  await sns.send(
    new SubscribeCommand({
      TopicArn,
      Protocol: "sqs",
      Endpoint: await queueArn(sqs, queueUrl),
      Attributes: { RawMessageDelivery: "true" },
    }),
  );
  return TopicArn;
}

/**
 * One shard: the demo's rate is far below a shard's 1,000 records/s, and per-key order needs no more. Waits for
 * ACTIVE (LocalStack takes a moment; moto is ACTIVE at once), since the relay's check refuses a CREATING stream.
 */
async function createStream(kinesis: KinesisClient, streamName: string): Promise<LocalTarget> {
  await kinesis.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: 1 }));
  let streamArn = "";
  for (let attempt = 0; streamArn === "" && attempt < 60; attempt++) {
    const { StreamDescriptionSummary: summary } = await kinesis.send(
      new DescribeStreamSummaryCommand({ StreamName: streamName }),
    );
    if (summary?.StreamStatus === "ACTIVE") streamArn = summary.StreamARN ?? "";
    else await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (streamArn === "") throw new Error(`stream ${streamName} did not become ACTIVE within 30 s`);
  return {
    consumerSource: { streamName, streamArn },
    relayEnv: routeEverything({ kind: "kinesis", streamArn }),
    // moto numbers a shard's record as its highest sequence number + 1 without a lock: two PutRecords at once can
    // get the same number, and one record silently replaces the other (seen: 1 of 51 events lost at the default
    // concurrency). One request at a time avoids it; at the demo's rates one PutRecords (500 records) is plenty.
    relayDefaults: { RELAY_CONCURRENCY: "1" },
    resources: `stream: ${streamArn}`,
    addresses: { OUTBOX_DEV_STREAM_ARN: streamArn },
    path: "Kinesis stream",
    async remove() {
      await kinesis.send(new DeleteStreamCommand({ StreamName: streamName })).catch(() => {});
      kinesis.destroy();
    },
  };
}

/**
 * A bus with one rule, `{"source": [source]}`, whose target is the consumer's queue: how a consuming service
 * subscribes to the relay's events. (On AWS the queue's policy must also let events.amazonaws.com send to it;
 * the emulators do not check, and these never run against a real account.)
 */
async function createBus(
  events: EventBridgeClient,
  source: string,
  targetArn: string,
  busName: string,
): Promise<{ busName: string; remove(): Promise<void> }> {
  const rule = `${busName}-to-consumer`;
  await events.send(new CreateEventBusCommand({ Name: busName }));
  await events.send(
    new PutRuleCommand({
      Name: rule,
      EventBusName: busName,
      EventPattern: JSON.stringify({ source: [source] }),
    }),
  );
  await events.send(
    new PutTargetsCommand({
      Rule: rule,
      EventBusName: busName,
      Targets: [{ Id: "consumer", Arn: targetArn }],
    }),
  );
  return {
    busName,
    async remove() {
      // Each step on its own: the in-process endpoint implements only what the relay and these need.
      const ignore = () => {};
      await events
        .send(new RemoveTargetsCommand({ Rule: rule, EventBusName: busName, Ids: ["consumer"] }))
        .catch(ignore);
      await events.send(new DeleteRuleCommand({ Name: rule, EventBusName: busName })).catch(ignore);
      await events.send(new DeleteEventBusCommand({ Name: busName })).catch(ignore);
    },
  };
}

/**
 * The resources one destination of a route table names (`outbox dev --routes`), created on the local endpoint
 * under the names its URL or ARN gives, with a queue for the consumer where the destination is not one: a topic's
 * subscribed queue, a bus's rule target (`<name>-consumer`).
 */
export async function createNamedTarget(
  setting: TargetSetting,
  clients: TargetClients,
): Promise<LocalTarget> {
  const { sqs } = clients;
  const named = (name: string) => ({ ...clients, name: () => name });
  const base = (name: string) => name.replace(/\.fifo$/, "");
  const noRemoval = async () => {};
  switch (setting.kind) {
    case "sqs-fifo":
    case "sqs": {
      const name = base(setting.queueUrl.slice(setting.queueUrl.lastIndexOf("/") + 1));
      const queueUrl = await createQueue(sqs, setting.kind === "sqs-fifo" ? "fifo" : "standard", named(name));
      return namedTarget({ queueUrl }, `queue: ${queueUrl}`, { queueUrl });
    }
    case "sns-fifo":
    case "sns": {
      const fifo = setting.kind === "sns-fifo";
      const name = base(setting.topicArn.slice(setting.topicArn.lastIndexOf(":") + 1));
      const queueUrl = await createQueue(sqs, fifo ? "fifo" : "standard", named(`${name}-consumer`));
      const sns = new SNSClient(clients.config);
      const topicArn = await createTopicToQueue(sns, sqs, queueUrl, fifo, name).finally(() => sns.destroy());
      return namedTarget({ queueUrl }, `topic: ${topicArn} -> queue: ${queueUrl}`, { topicArn, queueUrl });
    }
    case "kinesis": {
      const { stream } = setting;
      const name =
        "streamName" in stream
          ? stream.streamName
          : stream.streamArn.slice(stream.streamArn.indexOf("/") + 1);
      const target = await createStream(kinesisClient(clients.config), name);
      return { ...target, remove: noRemoval };
    }
    case "eventbridge": {
      const busName = setting.eventBusName.slice(setting.eventBusName.indexOf("/") + 1);
      const queueUrl = await createQueue(sqs, "standard", named(`${busName}-consumer`));
      const events = new EventBridgeClient(clients.config);
      await createBus(events, setting.source, await queueArn(sqs, queueUrl), busName).finally(() =>
        events.destroy(),
      );
      return namedTarget(
        { queueUrl },
        `bus: ${busName}  rule: source=${setting.source}  target queue: ${queueUrl}`,
        { eventBusName: busName, queueUrl },
      );
    }
  }
}

function namedTarget(
  consumerSource: ConsumerSource,
  resources: string,
  addresses: { queueUrl?: string; topicArn?: string; eventBusName?: string },
): LocalTarget {
  const env: Record<string, string> = {};
  if (addresses.topicArn !== undefined) env.OUTBOX_DEV_TOPIC_ARN = addresses.topicArn;
  if (addresses.eventBusName !== undefined) env.OUTBOX_DEV_EVENT_BUS_NAME = addresses.eventBusName;
  if (addresses.queueUrl !== undefined) env.OUTBOX_DEV_QUEUE_URL = addresses.queueUrl;
  return { consumerSource, relayEnv: {}, resources, addresses: env, path: resources, remove: async () => {} };
}
