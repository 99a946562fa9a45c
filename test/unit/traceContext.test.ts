import { KinesisClient } from "@aws-sdk/client-kinesis";
import { SNSClient } from "@aws-sdk/client-sns";
import { SQSClient } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { prepareEvent } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { kinesisDestination } from "../../functions/shared/destinations/kinesis/kinesis.ts";
import { snsDestination } from "../../functions/shared/destinations/sns/sns.ts";
import { sqsFifoDestination } from "../../functions/shared/destinations/sqs/sqsFifo.ts";
import { remoteSpanContext } from "../../functions/shared/observe/tracing.ts";
import { messageAttributes } from "../../functions/shared/outbox/message.ts";
import {
  checkTraceparent,
  checkTracestate,
  isXrayHeader,
  messageTrace,
  traceparentFromXray,
  xrayFromTraceparent,
} from "../../functions/shared/outbox/traceContext.ts";
import { aLoadedRow } from "../support/eventBridge.ts";

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const XRAY = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1";

describe("W3C traceparent <-> X-Ray trace header", () => {
  it("splits the trace id after 8 hex digits, keeps the span id, and maps the sampled flag", () => {
    expect(xrayFromTraceparent(TRACEPARENT)).toBe(XRAY);
    expect(xrayFromTraceparent(TRACEPARENT.replace(/-01$/, "-00"))).toMatch(/;Sampled=0$/);
    // Only bit 0 is "sampled": 0x03 (sampled + random) is sampled, 0x02 is not.
    expect(xrayFromTraceparent(TRACEPARENT.replace(/-01$/, "-03"))).toMatch(/;Sampled=1$/);
    expect(xrayFromTraceparent(TRACEPARENT.replace(/-01$/, "-02"))).toMatch(/;Sampled=0$/);
  });

  it("converts back losslessly, whatever the order of the X-Ray fields", () => {
    expect(traceparentFromXray(XRAY)).toBe(TRACEPARENT);
    expect(
      traceparentFromXray("Sampled=1;Parent=00f067aa0ba902b7;Root=1-4bf92f35-77b34da6a3ce929d0e0e4736"),
    ).toBe(TRACEPARENT);
    expect(traceparentFromXray(XRAY.replace("Sampled=1", "Sampled=?"))).toBe(
      TRACEPARENT.replace(/-01$/, "-00"),
    );
  });

  it("refuses what is not a trace: no parent, bad root, all-zero ids, another traceparent version", () => {
    expect(traceparentFromXray("Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Sampled=1")).toBeUndefined();
    expect(
      traceparentFromXray("Root=2-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7"),
    ).toBeUndefined();
    expect(traceparentFromXray(`Root=1-00000000-${"0".repeat(24)};Parent=00f067aa0ba902b7`)).toBeUndefined();
    expect(xrayFromTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toBeUndefined();
    expect(isXrayHeader("Root=1-4bf92f35-77b34da6a3ce929d0e0e4736")).toBe(true);
    expect(isXrayHeader("garbage")).toBe(false);
  });

  it("checks traceparent and tracestate with errors naming the field and the rule", () => {
    expect(checkTraceparent("trace", TRACEPARENT)).toBe(TRACEPARENT);
    expect(() => checkTraceparent("trace", TRACEPARENT.toUpperCase())).toThrow(
      /trace: .* is not a W3C traceparent/,
    );
    expect(() => checkTraceparent("trace", `00-${"0".repeat(32)}-00f067aa0ba902b7-01`)).toThrow(/all-zero/);
    expect(checkTracestate("state", "vendor=abc, other=x@1")).toBe("vendor=abc, other=x@1");
    expect(() => checkTracestate("state", "Vendor=abc")).toThrow(/state: is not a W3C tracestate/);
    expect(() => checkTracestate("state", `a=${"x".repeat(600)}`)).toThrow(/the limit is 512/);
  });
});

describe("the trace a message carries", () => {
  it("prefers the row's columns; without them, an X-Amzn-Trace-Id or traceparent header", () => {
    const other = "00-11111111111111111111111111111111-2222222222222222-00";
    expect(messageTrace({ traceparent: TRACEPARENT, tracestate: "a=1" }, { traceparent: other })).toEqual({
      context: { traceparent: TRACEPARENT, tracestate: "a=1" },
      xray: XRAY,
    });
    expect(messageTrace({}, { traceparent: TRACEPARENT })).toEqual({
      context: { traceparent: TRACEPARENT },
      xray: XRAY,
    });
    const explicit = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1";
    expect(messageTrace({}, { "X-Amzn-Trace-Id": explicit })).toEqual({ xray: explicit });
    // A malformed one would make SQS refuse the entry: not sent as a trace.
    expect(messageTrace({}, { "X-Amzn-Trace-Id": "nonsense" })).toEqual({});
  });

  it("puts traceparent and tracestate in the attribute slots the headers leave, never over SQS's 10", () => {
    const fields = {
      id: "4bf92f35-77b3-4da6-a3ce-929d0e0e4736",
      aggregateType: "order",
      aggregateId: "o-1",
      eventType: "order.created",
      createdAt: new Date(0),
      seq: "1",
      body: "{}",
      trace: { traceparent: TRACEPARENT, tracestate: "a=1" },
    };
    const names = (headers: Record<string, string>) => Object.keys(messageAttributes({ ...fields, headers }));
    expect(names({ a: "1", b: "2" })).toEqual(expect.arrayContaining(["traceparent", "tracestate"]));
    expect(names({ a: "1", b: "2", c: "3" })).toContain("traceparent");
    expect(names({ a: "1", b: "2", c: "3" })).not.toContain("tracestate");
    expect(names({ a: "1", b: "2", c: "3", d: "4" })).toHaveLength(10);
    expect(names({ a: "1", b: "2", c: "3", d: "4" })).not.toContain("traceparent");
    // The caller's own traceparent header is kept as written.
    const own = "00-11111111111111111111111111111111-2222222222222222-00";
    expect(messageAttributes({ ...fields, headers: { traceparent: own } }).traceparent?.StringValue).toBe(
      own,
    );
  });
});

describe("each destination's message for a row with a trace context", () => {
  const row = aLoadedRow({ traceparent: TRACEPARENT, tracestate: "a=1", headers: { tenant: "t-1" } });
  // prepare() builds the message only; no request is sent, so the clients point nowhere.
  const region = { region: "eu-west-1" };

  it("SQS: AWSTraceHeader system attribute and the W3C attributes", () => {
    const prepared = sqsFifoDestination(new SQSClient(region), {
      queueUrl: "https://sqs.local/1/q.fifo",
    }).prepare(row);
    if (typeof prepared === "string") throw new Error(prepared);
    expect(prepared.message.MessageSystemAttributes).toEqual({
      AWSTraceHeader: { DataType: "String", StringValue: XRAY },
    });
    expect(prepared.message.MessageAttributes?.traceparent?.StringValue).toBe(TRACEPARENT);
    expect(prepared.message.MessageAttributes?.tracestate?.StringValue).toBe("a=1");
    // The W3C attributes count towards the message size; the system attribute does not.
    const untraced = sqsFifoDestination(new SQSClient(region), {
      queueUrl: "https://sqs.local/1/q.fifo",
    }).prepare({
      ...row,
      traceparent: null,
      tracestate: null,
    });
    if (typeof untraced === "string") throw new Error(untraced);
    expect(prepared.size - untraced.size).toBe("traceparent".length + 6 + 55 + "tracestate".length + 6 + 3);
  });

  it("SNS: the W3C attributes", () => {
    const prepared = snsDestination(new SNSClient(region), {
      topicArn: "arn:aws:sns:eu-west-1:1:t",
      fifo: false,
    }).prepare(row);
    if (typeof prepared === "string") throw new Error(prepared);
    expect(prepared.message.MessageAttributes?.traceparent?.StringValue).toBe(TRACEPARENT);
  });

  it("EventBridge and Kinesis: TraceHeader, and the context among the envelope's headers", () => {
    const event = prepareEvent(row, { eventBusName: "bus", source: "orders" });
    if (typeof event === "string") throw new Error(event);
    expect(event.message.TraceHeader).toBe(XRAY);
    expect(JSON.parse(event.message.Detail ?? "").headers).toEqual({
      traceparent: TRACEPARENT,
      tracestate: "a=1",
      tenant: "t-1",
    });
    const record = kinesisDestination(new KinesisClient(region), { stream: { streamName: "s" } }).prepare(
      row,
    );
    if (typeof record === "string") throw new Error(record);
    expect(JSON.parse(Buffer.from(record.message.Data ?? []).toString()).headers.traceparent).toBe(
      TRACEPARENT,
    );
  });
});

describe("the remote parent the inbox continues", () => {
  it("is the traceparent, else the AWSTraceHeader converted, even when a traceparent header is malformed", async () => {
    const api = await import("@opentelemetry/api");
    expect(remoteSpanContext(api, { traceparent: TRACEPARENT, tracestate: "a=1" })).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      traceFlags: 1,
      isRemote: true,
    });
    expect(remoteSpanContext(api, { traceparent: "garbage", awsTraceHeader: XRAY })?.spanId).toBe(
      "00f067aa0ba902b7",
    );
    expect(remoteSpanContext(api, { traceparent: "garbage" })).toBeUndefined();
  });
});
