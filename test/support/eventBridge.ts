import { randomBytes } from "node:crypto";
import {
  CreateEventBusCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { inject } from "vitest";
import type { PublishedEvent } from "../../cli/dev/aws/eventBridge.ts";
import { type Delivery, type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import type { LoadedRow } from "../../functions/shared/destinations/destination.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

export function eventBridgeClient(endpoint = inject("awsEndpoint"), maxAttempts = 3): EventBridgeClient {
  return new EventBridgeClient({ ...LOCAL_AWS, endpoint, maxAttempts });
}

export interface BusToQueue {
  busName: string;
  queueUrl: string;
}

/**
 * A bus with one rule (events of `source`) targeting a standard queue: how a test reads published events back,
 * as a consumer of a real bus would.
 */
export async function createBusToQueue(
  events: EventBridgeClient,
  sqs: SQSClient,
  source: string,
  prefix = "outbox-test",
): Promise<BusToQueue> {
  const suffix = randomBytes(4).toString("hex");
  const busName = `${prefix}-${suffix}`;
  await events.send(new CreateEventBusCommand({ Name: busName }));
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: `${prefix}-${suffix}`, Attributes: { VisibilityTimeout: "60" } }),
  );
  if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["QueueArn"] }),
  );
  const ruleName = `to-queue-${suffix}`;
  await events.send(
    new PutRuleCommand({
      Name: ruleName,
      EventBusName: busName,
      EventPattern: JSON.stringify({ source: [source] }),
    }),
  );
  await events.send(
    new PutTargetsCommand({
      Rule: ruleName,
      EventBusName: busName,
      Targets: [{ Id: "queue", Arn: Attributes?.QueueArn }],
    }),
  );
  return { busName, queueUrl: QueueUrl };
}

let seq = 0;

/** A claimed and loaded row as a destination sees it, for destination-level tests that need no database. */
export function aLoadedRow(overrides: Partial<LoadedRow> = {}): LoadedRow {
  seq += 1;
  return {
    id: `00000000-0000-4000-8000-${String(seq).padStart(12, "0")}`,
    seq: String(seq),
    aggregate_type: "order",
    aggregate_id: `order-${randomBytes(3).toString("hex")}`,
    event_type: "order.created",
    payload: `{"n": ${seq}, "total": 4200}`,
    headers: {},
    attempts: 0,
    transient_failures: 0,
    created_at: new Date("2026-12-01T10:00:00.000Z"),
    ...overrides,
  };
}

/**
 * The events a fake bus accepted, in arrival order, as the ledger reads deliveries: the outbox id (from the
 * detail) in place of a dedup id and the aggregate in place of a message group.
 */
export function eventsAsDeliveries(events: PublishedEvent[]): Delivery[] {
  return events.map((event) => {
    const detail = JSON.parse(event.detail) as { outboxId: string; aggregateId: string };
    return {
      queueName: event.bus,
      messageId: event.eventId,
      groupId: detail.aggregateId,
      dedupId: detail.outboxId,
      body: event.detail,
      attributes: {},
      sequenceNumber: undefined,
      duplicate: false,
      at: event.at,
    };
  });
}

export interface FakeBus extends BusToQueue {
  fake: FakeSqs;
  /** Without SDK retries: what the destination or the relay does with each failure is under test. */
  events: EventBridgeClient;
  sqs: SQSClient;
  close(): Promise<void>;
}

/** The in-process endpoint with a bus whose rule (events of `source`) targets a queue. */
export async function startFakeBus(source: string, prefix: string): Promise<FakeBus> {
  const fake = await startFakeSqs();
  const events = new EventBridgeClient({ ...LOCAL_AWS, endpoint: fake.url, maxAttempts: 1 });
  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url });
  const route = await createBusToQueue(events, sqs, source, prefix);
  return {
    ...route,
    fake,
    events,
    sqs,
    async close() {
      events.destroy();
      sqs.destroy();
      await fake.close();
    },
  };
}
