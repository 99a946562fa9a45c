import {
  CreateEventBusCommand,
  type EventBridgeClient,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import { PurgeQueueCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { FakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { eventBridgeDestination } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { aLoadedRow, type FakeBus, startFakeBus } from "../support/eventBridge.ts";
import { receiveAll } from "../support/sqs.ts";

const SOURCE = "com.example.orders";
let bus: FakeBus;
let fake: FakeSqs;
let events: EventBridgeClient;
let sqs: SQSClient;
let busName: string;
let queueUrl: string;

beforeAll(async () => {
  bus = await startFakeBus(SOURCE, "eb-faults");
  ({ fake, events, sqs, busName, queueUrl } = bus);
});
afterAll(() => bus.close());
beforeEach(async () => {
  fake.resetFaults();
  fake.up();
  fake.events.clearEvents();
  await sqs.send(new PurgeQueueCommand({ QueueUrl: queueUrl }));
});

function destination() {
  return eventBridgeDestination(events, { eventBusName: busName, source: SOURCE });
}

function batchOf(count: number, overrides = {}) {
  const target = destination();
  return Array.from({ length: count }, () => {
    const event = target.prepare(aLoadedRow(overrides));
    if (typeof event === "string") throw new Error(event);
    return event;
  });
}

describe("EventBridge destination under faults (in-process endpoint)", () => {
  it("reads every entry's result: only the accepted ones are published; each failure classified by its code", async () => {
    const batch = batchOf(5);
    const code = new Map([
      [batch[1]?.row.id, "ThrottlingException"],
      [batch[2]?.row.id, "MalformedDetail"],
      [batch[3]?.row.id, "RedactionFailure"],
      [batch[4]?.row.id, "NotAuthorizedForDetailTypeException"],
    ]);
    fake.events.failEntry = (entry) => {
      const failing = code.get(JSON.parse(entry.Detail ?? "{}").outboxId);
      return failing === undefined ? false : { code: failing };
    };

    const results = await destination().send(batch);

    expect(results.map((result) => result.row.id)).toEqual(batch.map((event) => event.row.id));
    expect(results.map((r) => [r.status, r.status === "rejected" ? r.permanent : undefined])).toEqual([
      ["published", undefined],
      ["unsent", undefined], // throttled entry: the bus's fault, retried without counting towards dead letters
      ["rejected", true], // the detail is invalid: no retry can fix it
      ["rejected", false], // unknown to be permanent: counts towards max attempts
      ["unsent", undefined], // a missing permission is not the message's fault
    ]);
    expect(results[1]?.status === "unsent" && results[1].error).toMatch(/ThrottlingException/);
    expect(fake.events.events(busName).map((event) => JSON.parse(event.detail).outboxId)).toEqual([
      batch[0]?.row.id,
    ]);
    expect(await receiveAll(sqs, queueUrl, 1)).toHaveLength(1);
  });

  it("reports a throttled request as unsent for every entry", async () => {
    fake.setFaults({ throttle: (action) => action === "PutEvents" });
    const results = await destination().send(batchOf(3));
    expect(results.map((result) => result.status)).toEqual(["unsent", "unsent", "unsent"]);
    expect(results[0]?.status === "unsent" && results[0].error).toMatch(/ThrottlingException/);
    expect(fake.events.events(busName)).toHaveLength(0);
  });

  it("reports an outage (connection reset, 503, 500) as uncertain (it may have arrived), never as the message's fault", async () => {
    fake.down("reset");
    const reset = await destination().send(batchOf(2));
    fake.down("unavailable");
    const unavailable = await destination().send(batchOf(2));
    fake.up();
    fake.setFaults({ failRequests: (action) => action === "PutEvents" });
    const internal = await destination().send(batchOf(2));
    for (const results of [reset, unavailable, internal]) {
      expect(results.map((result) => result.status)).toEqual(["uncertain", "uncertain"]);
    }
    expect(internal[0]?.status === "uncertain" && internal[0].error).toMatch(/InternalError/);
  });

  it("when one entry makes the whole request invalid, sends each alone so the healthy ones are published", async () => {
    const batch = batchOf(3);
    const poison = batch[1]?.row.id ?? "";
    // As EventBridge answers a request whose entries are invalid as a whole (ValidationException).
    fake.setFaults({
      failRequests: (action, request) =>
        action === "PutEvents" && JSON.stringify(request.input).includes(poison)
          ? { code: "ValidationException", message: "1 validation error detected" }
          : false,
    });

    const results = await destination().send(batch);

    expect(results.map((r) => [r.row.id, r.status])).toEqual([
      [batch[0]?.row.id, "published"],
      [poison, "rejected"],
      [batch[2]?.row.id, "published"],
    ]);
    expect(results[1]?.status === "rejected" && results[1].permanent).toBe(true);
  });

  it("a request over the size limit is refused as a whole by the bus; one that fits the limit is accepted", async () => {
    // Two events of ~600 KB: each fits, together they are over 1 MB. Packing by the destination's
    // maxBatchBytes keeps them apart; sent together, the bus refuses them and the split publishes both.
    const target = destination();
    const batch = batchOf(2, { payload: `"${"x".repeat(600_000)}"` });
    expect(batch[0]?.size).toBeGreaterThan(target.maxBatchBytes / 2);
    const requests: number[] = [];
    fake.setFaults({
      latencyMs: (action, request) => {
        if (action === "PutEvents") requests.push((request.input.Entries as unknown[]).length);
        return 0;
      },
    });
    const results = await target.send(batch);
    expect(results.map((result) => result.status)).toEqual(["published", "published"]);
    expect(requests).toEqual([2, 1, 1]);
  });

  it("carries the trace header through the bus to the target queue's AWSTraceHeader", async () => {
    const [event] = batchOf(1, {
      headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
    });
    if (event === undefined) throw new Error("no event");
    expect(await destination().send([event])).toMatchObject([{ status: "published" }]);
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.Attributes?.AWSTraceHeader).toBe(
      "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
    );
  });

  it("the fake answers like EventBridge: per-entry codes for invalid entries, ValidationException past 10", async () => {
    await events.send(new CreateEventBusCommand({ Name: "wire-check" }));
    await events.send(
      new PutRuleCommand({ Name: "none", EventBusName: "wire-check", EventPattern: '{"source":["nobody"]}' }),
    );
    await events.send(new PutTargetsCommand({ Rule: "none", EventBusName: "wire-check", Targets: [] }));
    const response = await events.send(
      new PutEventsCommand({
        Entries: [
          { EventBusName: "wire-check", Source: "s", DetailType: "t", Detail: "{}" },
          { EventBusName: "wire-check", Source: "s", DetailType: "t", Detail: "[1]" },
          { EventBusName: "wire-check", Source: "s", Detail: "{}" },
        ],
      }),
    );
    expect(response.FailedEntryCount).toBe(2);
    expect(response.Entries?.map((entry) => entry.ErrorCode)).toEqual([
      undefined,
      "MalformedDetail",
      "InvalidArgument",
    ]);
    const eleven = Array.from({ length: 11 }, () => ({
      EventBusName: "wire-check",
      Source: "s",
      DetailType: "t",
      Detail: "{}",
    }));
    await expect(events.send(new PutEventsCommand({ Entries: eleven }))).rejects.toMatchObject({
      name: "ValidationException",
    });
  });
});
