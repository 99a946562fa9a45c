import type { Message, SQSClient } from "@aws-sdk/client-sqs";
import { context, createTraceState, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import { createInboxHandler, type InboxEvent } from "../../functions/shared/consumer/index.ts";
import { traceparentFromXray } from "../../functions/shared/outbox/traceContext.ts";
import { CONSUMER_SCHEMA, createConsumerTables } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const fake = useFakeSqs();
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(async () => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(provider);
  await createConsumerTables(db.pool);
});
afterAll(() => {
  trace.disable();
  context.disable();
});
beforeEach(() => exporter.reset());

/** The producer's span runs under a remote parent carrying a tracestate, as a service called with one would. */
const CALLER = {
  traceId: "5759e988bd862e3fe1be46a994272793",
  spanId: "53995c3f42cd8ad8",
  traceFlags: 1,
  isRemote: true,
  traceState: createTraceState("vendor=abc,other=1"),
};

async function enqueueInSpan(event: ReturnType<typeof anEvent>) {
  const parent = trace.setSpanContext(ROOT_CONTEXT, CALLER);
  return trace.getTracer("test").startActiveSpan("checkout", {}, parent, async (span) => {
    try {
      const { id } = await enqueueCommitted(db.pool, event);
      return { id, producer: span.spanContext() };
    } finally {
      span.end();
    }
  });
}

async function consume(sqs: SQSClient, queueUrl: string) {
  const seen: { event: InboxEvent; activeTraceId: string | undefined }[] = [];
  const handler = createInboxHandler(
    (event) => void seen.push({ event, activeTraceId: trace.getActiveSpan()?.spanContext().traceId }),
    { pool: db.pool, schema: CONSUMER_SCHEMA },
  );
  const result = await pollOnce(sqs, queueUrl, handler);
  return { ...result, seen };
}

const attribute = (message: Message | undefined, name: string) =>
  message?.MessageAttributes?.[name]?.StringValue;
const spansNamed = (prefix: string): ReadableSpan[] =>
  exporter.getFinishedSpans().filter((span) => span.name.startsWith(prefix));

/**
 * moto 5.2 ignores the MessageSystemAttributes of SendMessageBatch entries (its SendMessage keeps them), so there
 * only the W3C attributes are checked; the fake keeps it as SQS does (SQS API Reference, Message.Attributes).
 */
const sources = [
  { name: "the in-process SQS fake", sqs: () => fake.sqs, keepsTraceHeader: true },
  { name: `the SQS emulator (${inject("awsSource")})`, sqs: () => sqsClient(), keepsTraceHeader: false },
];

describe.each(sources)(
  "trace context from producer through the relay to the inbox, on $name",
  ({ sqs: client, keepsTraceHeader }) => {
    it("arrives with the producer's trace id in AWSTraceHeader and traceparent; the publish span links it; the inbox span is its child", async () => {
      const sqs = client();
      const queueUrl = await createFifoQueue(sqs, "trace");
      const { id, producer } = await enqueueInSpan(
        anEvent({ eventType: "order.placed", headers: { tenant: "t-1" } }),
      );
      const traceparent = `00-${producer.traceId}-${producer.spanId}-01`;
      const { rows } = await db.pool.query(
        "select traceparent, tracestate, headers from outbox_events where id = $1",
        [id],
      );
      // Captured in the row's own columns; the caller's headers are untouched (no slot used).
      expect(rows).toEqual([{ traceparent, tracestate: "vendor=abc,other=1", headers: { tenant: "t-1" } }]);

      await drain(db.pool, sqs, testRelayOptions(queueUrl));
      const { seen, messages } = await consume(sqs, queueUrl);

      const [message] = messages;
      expect(attribute(message, "traceparent")).toBe(traceparent);
      expect(attribute(message, "tracestate")).toBe("vendor=abc,other=1");
      if (keepsTraceHeader) {
        const awsTraceHeader = message?.Attributes?.AWSTraceHeader ?? "";
        expect(awsTraceHeader).toBe(
          `Root=1-${producer.traceId.slice(0, 8)}-${producer.traceId.slice(8)};Parent=${producer.spanId};Sampled=1`,
        );
        expect(traceparentFromXray(awsTraceHeader)).toBe(traceparent);
      }

      const [publish] = spansNamed("send sqs-fifo");
      expect(publish?.links.map((link) => link.context.traceId)).toContain(producer.traceId);
      expect(publish?.links.find((link) => link.context.traceId === producer.traceId)?.context.spanId).toBe(
        producer.spanId,
      );

      const [process] = spansNamed("process order.placed");
      expect(process?.spanContext().traceId).toBe(producer.traceId);
      expect(process?.parentSpanContext?.spanId).toBe(producer.spanId);
      // The user's handler runs inside it: its own spans join the producer's trace.
      expect(seen.map((entry) => [entry.event.id, entry.activeTraceId])).toEqual([[id, producer.traceId]]);
    });

    it("with 4 headers, sends the trace as AWSTraceHeader only (SQS's 10 attributes are taken) and the inbox still continues it", async () => {
      const sqs = client();
      const queueUrl = await createFifoQueue(sqs, "trace-full");
      const headers = { a: "1", b: "2", c: "3", d: "4" };
      const { producer } = await enqueueInSpan(anEvent({ eventType: "order.full", headers }));

      await drain(db.pool, sqs, testRelayOptions(queueUrl));
      const { messages } = await consume(sqs, queueUrl);

      expect(Object.keys(messages[0]?.MessageAttributes ?? {})).toHaveLength(10);
      expect(attribute(messages[0], "traceparent")).toBeUndefined();
      if (keepsTraceHeader) {
        expect(messages[0]?.Attributes?.AWSTraceHeader).toContain(`Parent=${producer.spanId}`);
        expect(spansNamed("process order.full")[0]?.spanContext().traceId).toBe(producer.traceId);
      }
    });
  },
);

describe("enqueue's size check", () => {
  it("counts the captured context's traceparent and tracestate attributes", async () => {
    const refusedSize = async (write: () => Promise<unknown>) => {
      const error = await write().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      return Number(/message would be (\d+) bytes/.exec(String(error))?.[1]);
    };
    const tooSmall = { maxMessageBytes: 100 };
    const untraced = await refusedSize(() =>
      enqueueCommitted(db.pool, anEvent({ payload: { n: 1 } }), tooSmall),
    );
    const traced = await refusedSize(() =>
      trace
        .getTracer("test")
        .startActiveSpan("checkout", {}, trace.setSpanContext(ROOT_CONTEXT, CALLER), async (span) => {
          try {
            return await enqueueCommitted(db.pool, anEvent({ payload: { n: 1 } }), tooSmall);
          } finally {
            span.end();
          }
        }),
    );
    // "traceparent" + "String" + 55 characters; "tracestate" + "String" + "vendor=abc,other=1".
    expect(untraced).toBeGreaterThan(100);
    expect(traced - untraced).toBe(11 + 6 + 55 + 10 + 6 + 18);
  });
});

describe("without a span or a tracer", () => {
  it("captures nothing outside a span: no column, no trace attribute, no AWSTraceHeader", async () => {
    const queueUrl = await createFifoQueue(fake.sqs, "untraced");
    const { id } = await enqueueCommitted(db.pool, anEvent());
    const { rows } = await db.pool.query("select traceparent, tracestate from outbox_events where id = $1", [
      id,
    ]);
    await drain(db.pool, fake.sqs, testRelayOptions(queueUrl));
    const { messages } = await consume(fake.sqs, queueUrl);

    expect(rows).toEqual([{ traceparent: null, tracestate: null }]);
    expect(attribute(messages[0], "traceparent")).toBeUndefined();
    expect(messages[0]?.Attributes?.AWSTraceHeader).toBeUndefined();
  });

  it("records no span when no tracer is registered, and still carries the captured context", async () => {
    const queueUrl = await createFifoQueue(fake.sqs, "no-tracer");
    const { producer } = await enqueueInSpan(anEvent({ eventType: "order.quiet" }));
    trace.disable();
    try {
      exporter.reset();
      await drain(db.pool, fake.sqs, testRelayOptions(queueUrl));
      const { messages, seen } = await consume(fake.sqs, queueUrl);

      expect(exporter.getFinishedSpans()).toEqual([]);
      expect(attribute(messages[0], "traceparent")).toBe(`00-${producer.traceId}-${producer.spanId}-01`);
      expect(seen[0]?.event.trace.awsTraceHeader).toContain(producer.traceId.slice(8));
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });
});
