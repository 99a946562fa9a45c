import type { Link } from "@opentelemetry/api";
import type { Destination, Prepared, PublishResult } from "../destinations/destination.ts";
import { inSpan, type openTelemetry, remoteSpanContext } from "../observe/tracing.ts";
import { messageTrace } from "../outbox/traceContext.ts";

type Api = Awaited<ReturnType<typeof openTelemetry>>;

/** OpenTelemetry's messaging.system values where it names one (semantic conventions, messaging spans). */
const SYSTEMS: Record<string, string> = {
  "sqs-fifo": "aws_sqs",
  sqs: "aws_sqs",
  "sns-fifo": "aws.sns",
  sns: "aws.sns",
};

/**
 * Sends one request inside a PRODUCER span `send <kind>` (OpenTelemetry's messaging conventions for a batch
 * publish): one span per request, linked to each event's own trace (the producer's span `enqueue` captured), as
 * a batch serves many traces and can be the child of none. The span's parent is whatever is active in the relay
 * (the invocation's span under a Lambda instrumentation). It ends in error when any entry was not published.
 * Without OpenTelemetry or without a tracer provider (`api` undefined: recordingApi) the request is sent with
 * nothing built.
 */
export function sendInSpan<Message>(
  api: Api,
  destination: Destination<Message>,
  batch: readonly Prepared<Message>[],
  signal: AbortSignal | undefined,
): Promise<PublishResult[]> {
  if (api === undefined) return destination.send(batch, signal);
  const links: Link[] = [];
  for (const { row } of batch) {
    const context = messageTrace(row, stringValues(row.headers)).context;
    const spanContext = context === undefined ? undefined : remoteSpanContext(api, context);
    if (spanContext !== undefined)
      links.push({ context: spanContext, attributes: { "messaging.message.id": row.id } });
  }
  const attributes = {
    "messaging.system": SYSTEMS[destination.kind] ?? destination.kind,
    "messaging.operation.type": "send",
    "messaging.destination.name": destination.target,
    "messaging.batch.message_count": batch.length,
  };
  return inSpan(api, `send ${destination.kind}`, { kind: "producer", attributes, links }, async (span) => {
    const results = await destination.send(batch, signal);
    const published = results.filter((result) => result.status === "published").length;
    span?.setAttribute("outbox.published_count", published);
    if (published < results.length) {
      span?.setStatus({
        code: api.SpanStatusCode.ERROR,
        message: `${results.length - published} entries not published`,
      });
    }
    return results;
  });
}

/**
 * The API to publish with spans: `api` when a tracer provider is registered, else undefined. Without a provider the
 * API hands out a ProxyTracer with nothing to delegate to, whose spans record nothing; sendInSpan would still parse
 * every row's trace context a second time for links no one reads and run each request inside a span: ~3 % of the
 * relay thread's CPU (bench profile, docs/benchmarks.md). A provider registered through another copy of the API is
 * not our ProxyTracer, so it counts as registered. Asked once per round: a provider registered later (a test, a
 * Lambda layer's wrapper) is seen by the next round.
 */
export function recordingApi(api: Api): Api {
  if (api === undefined) return undefined;
  return api.trace.getTracer(TRACER_PROBE) instanceof api.ProxyTracer ? undefined : api;
}

/** Any name does: the probe asks the provider whether it has a delegate, and no span is started with it. */
const TRACER_PROBE = "aws-outbox-relay";

/** The string-valued headers of a row (a hand-inserted row's may be anything; the destination judges those). */
function stringValues(headers: unknown): Record<string, string> {
  if (headers === null || typeof headers !== "object") return {};
  return Object.fromEntries(
    Object.entries(headers).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
  );
}
