import type { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  EVENTBRIDGE_MAX_REQUEST_BYTES,
  eventBridgeDestination,
} from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { messageTrace } from "../../functions/shared/outbox/traceContext.ts";
import { aLoadedRow, createBusToQueue, eventBridgeClient } from "../support/eventBridge.ts";
import { receiveAll, sqsClient } from "../support/sqs.ts";

const SOURCE = "com.example.orders";
let events: EventBridgeClient;
let sqs: SQSClient;

beforeAll(() => {
  events = eventBridgeClient();
  sqs = sqsClient();
});
afterAll(() => {
  events.destroy();
  sqs.destroy();
});

function prepared(destination: ReturnType<typeof eventBridgeDestination>, row = aLoadedRow()) {
  const result = destination.prepare(row);
  if (typeof result === "string") throw new Error(result);
  return result;
}

describe("EventBridge destination against the emulator (bus -> rule -> queue)", () => {
  it("publishes each row as an event a rule routes to its target, with the documented envelope", async () => {
    const { busName, queueUrl } = await createBusToQueue(events, sqs, SOURCE, "eb-envelope");
    const destination = eventBridgeDestination(events, { eventBusName: busName, source: SOURCE });
    const rows = [
      aLoadedRow({ payload: `{"big": 12345678901234567890, "list": [1, 2]}`, headers: { tenant: "t-1" } }),
      aLoadedRow({ event_type: "order.paid", payload: "[1, 2, 3]" }),
      aLoadedRow({ event_type: "order.noted", payload: `"just a string"` }),
    ];

    const results = await destination.send(rows.map((row) => prepared(destination, row)));

    expect(results.map((result) => result.status)).toEqual(["published", "published", "published"]);
    const received = await receiveAll(sqs, queueUrl, 3);
    const bodies = received.map((message) => JSON.parse(message.Body ?? "{}"));
    const byId = new Map(bodies.map((body) => [body.detail.outboxId, body]));
    const first = byId.get(rows[0]?.id);
    expect(first).toMatchObject({
      source: SOURCE,
      "detail-type": "order.created",
      detail: {
        outboxId: rows[0]?.id,
        aggregateType: "order",
        aggregateId: rows[0]?.aggregate_id,
        eventType: "order.created",
        seq: rows[0]?.seq,
        createdAt: "2026-12-01T10:00:00.000Z",
        headers: { tenant: "t-1" },
        payload: { list: [1, 2] },
      },
    });
    // Non-object payloads are valid in the envelope (Detail itself must be an object).
    expect(byId.get(rows[1]?.id)?.detail.payload).toEqual([1, 2, 3]);
    expect(byId.get(rows[2]?.id)?.detail.payload).toBe("just a string");
    expect(byId.get(rows[1]?.id)?.["detail-type"]).toBe("order.paid");
  });

  it("sends the payload's text unchanged inside the detail, so big numbers keep every digit", () => {
    const destination = eventBridgeDestination(events, { eventBusName: "bus", source: SOURCE });
    const event = prepared(destination, aLoadedRow({ payload: `{"big": 12345678901234567890}` }));
    expect(event.message.Detail).toMatch(/"payload":\{"big":12345678901234567890\}\}$/);
    expect(event.message).toMatchObject({ Source: SOURCE, DetailType: "order.created", EventBusName: "bus" });
  });

  it("counts an entry's size as EventBridge does and refuses, naming the limit, an event over it", () => {
    const destination = eventBridgeDestination(events, { eventBusName: "bus", source: SOURCE });
    const event = prepared(destination);
    const expected =
      14 +
      Buffer.byteLength(SOURCE) +
      Buffer.byteLength("order.created") +
      Buffer.byteLength(event.message.Detail ?? "");
    expect(event.size).toBe(expected);

    const huge = destination.prepare(
      aLoadedRow({ payload: `"${"x".repeat(EVENTBRIDGE_MAX_REQUEST_BYTES)}"` }),
    );
    expect(huge).toMatch(/payload: event is \d+ bytes .* over the limit of 1048575/);
  });

  it("refuses an event type longer than a detail-type may be (128 characters)", () => {
    const destination = eventBridgeDestination(events, { eventBusName: "bus", source: SOURCE });
    const result = destination.prepare(aLoadedRow({ event_type: "e".repeat(129) }));
    expect(result).toMatch(/event_type: is 129 characters.*1-128/);
    expect(typeof destination.prepare(aLoadedRow({ event_type: "e".repeat(128) }))).toBe("object");
  });

  it("dead-letters, rather than throws on, a row it cannot build (headers not strings, an invalid date)", () => {
    const destination = eventBridgeDestination(events, { eventBusName: "bus", source: SOURCE });
    expect(destination.prepare(aLoadedRow({ created_at: Number.POSITIVE_INFINITY }))).toMatch(
      /created_at: is Infinity/,
    );
    expect(destination.prepare(aLoadedRow({ headers: "x" }))).toMatch(/headers: must be an object/);
    expect(destination.prepare(aLoadedRow({ headers: { n: 1 } }))).toMatch(/headers.n: must be a string/);
    expect(destination.prepare(aLoadedRow({ created_at: new Date(Number.NaN) }))).toMatch(
      /created_at: is beyond the range of a JavaScript Date/,
    );
  });

  it("refuses a reserved or empty source at construction", () => {
    expect(() => eventBridgeDestination(events, { eventBusName: "bus", source: "aws.orders" })).toThrow(
      /source: "aws.orders": the aws. prefix is reserved/,
    );
    expect(() => eventBridgeDestination(events, { eventBusName: "bus", source: "" })).toThrow(/1-256/);
  });

  it("carries trace context as the X-Ray TraceHeader: X-Amzn-Trace-Id as is, a W3C traceparent converted", () => {
    const xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    expect(messageTrace({}, { "X-Amzn-Trace-Id": xray }).xray).toBe(xray);
    expect(
      messageTrace({}, { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }).xray,
    ).toBe("Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1");
    expect(
      messageTrace({}, { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" }).xray,
    ).toMatch(/Sampled=0$/);
    expect(messageTrace({}, { traceparent: "garbage" }).xray).toBeUndefined();
    expect(messageTrace({}, { tenant: "t-1" }).xray).toBeUndefined();
  });

  it("reports an unknown bus as unsent (a configuration fault, retried), never as the message's fault", async () => {
    const destination = eventBridgeDestination(events, { eventBusName: "no-such-bus", source: SOURCE });
    const [result] = await destination.send([prepared(destination)]);
    expect(result?.status).toBe("unsent");
    expect(result?.status === "unsent" && result.error).toMatch(/ResourceNotFound/);
  });
});
