import { ProxyTracer, trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Destination, PublishResult } from "../../functions/shared/destinations/destination.ts";
import { publishRows } from "../../functions/shared/relay/publisher.ts";
import { aLoadedRow } from "../support/eventBridge.ts";

/**
 * The publish span costs nothing without a tracer provider (relay/publishSpan.ts, recordingApi): the OpenTelemetry
 * API is installed here (a dev dependency), so only the provider decides. With one, each request gets its span.
 */
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const traced = () => aLoadedRow({ traceparent: TRACEPARENT });

const destination: Destination<string> = {
  kind: "sqs-fifo",
  target: "memory",
  maxBatchEntries: 10,
  maxBatchBytes: 1_000_000,
  maxMessageBytes: 1_000_000,
  prepare: (row) => ({ row, message: row.id, size: 10 }),
  send: async (batch): Promise<PublishResult[]> =>
    batch.map((entry) => ({ row: entry.row, status: "published" })),
};

afterEach(() => {
  vi.restoreAllMocks();
  trace.disable();
});

describe("the publish span", () => {
  it("is not started, nor its links built, when no tracer provider is registered", async () => {
    const started = vi.spyOn(ProxyTracer.prototype, "startActiveSpan");

    const results = await publishRows(destination, [traced(), traced()], { concurrency: 2 });

    expect(results.map((result) => result.status)).toEqual(["published", "published"]);
    expect(started).not.toHaveBeenCalled();
  });

  it("is recorded per request, linked to each event's trace, once a provider is registered", async () => {
    const exporter = new InMemorySpanExporter();
    await publishRows(destination, [traced()], { concurrency: 1 });
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );

    await publishRows(destination, [traced(), traced()], { concurrency: 1 });

    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => span.name)).toEqual(["send sqs-fifo"]);
    expect(spans[0]?.links.map((link) => link.context.traceId)).toEqual([
      "4bf92f3577b34da6a3ce929d0e0e4736",
      "4bf92f3577b34da6a3ce929d0e0e4736",
    ]);
  });
});
