import type { Context, Link, Span, SpanContext, SpanKind, Tracer } from "@opentelemetry/api";
import { MAX_TRACESTATE_LENGTH, type TraceContext, traceparentFromXray } from "../outbox/traceContext.ts";

/**
 * OpenTelemetry, when the application has it. `@opentelemetry/api` is an optional peer dependency: it is imported
 * lazily, once, and every function here is a no-op without it (nothing is captured, no span is started). With the
 * API but no SDK registered, the API's own no-op tracer answers: spans are non-recording and cost a few
 * allocations. The tracer is looked up through the API's global provider on every use, so an SDK registered after
 * this module loaded (the Lambda layer's wrapper, a test) is seen.
 */
type Api = typeof import("@opentelemetry/api");

let loading: Promise<Api | undefined> | undefined;

export function openTelemetry(): Promise<Api | undefined> {
  loading ??= import("@opentelemetry/api").then(
    (api) => api,
    () => undefined,
  );
  return loading;
}

const TRACER_NAME = "aws-outbox-relay";

/**
 * The W3C context of the span active in the caller's async context (a span of the caller's HTTP handler, say),
 * for `enqueue` to store with the event; undefined without OpenTelemetry or outside any span. A tracestate longer
 * than the column takes (migration 0013) is dropped rather than cut, as W3C allows for an overlong one.
 */
export async function activeTraceContext(): Promise<TraceContext | undefined> {
  const api = await openTelemetry();
  if (api === undefined) return undefined;
  const span = api.trace.getSpan(api.context.active());
  const spanContext = span?.spanContext();
  if (spanContext === undefined || !api.isSpanContextValid(spanContext)) return undefined;
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, "0");
  const context: TraceContext = { traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${flags}` };
  const tracestate = spanContext.traceState?.serialize() ?? "";
  if (tracestate !== "" && tracestate.length <= MAX_TRACESTATE_LENGTH) context.tracestate = tracestate;
  return context;
}

/** The remote span context a message names: its traceparent, else its X-Ray header converted. */
export function remoteSpanContext(
  api: Api,
  trace: { traceparent?: string; tracestate?: string; awsTraceHeader?: string },
): SpanContext | undefined {
  const w3c = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
  const fromXray = trace.awsTraceHeader === undefined ? undefined : traceparentFromXray(trace.awsTraceHeader);
  // A caller's malformed traceparent header does not hide a good AWSTraceHeader.
  const match = w3c.exec(trace.traceparent ?? "") ?? w3c.exec(fromXray ?? "");
  if (match === null) return undefined;
  const spanContext: SpanContext = {
    traceId: match[1] ?? "",
    spanId: match[2] ?? "",
    traceFlags: Number.parseInt(match[3] ?? "00", 16) & 1,
    isRemote: true,
  };
  if (match.input === trace.traceparent && trace.tracestate !== undefined) {
    spanContext.traceState = api.createTraceState(trace.tracestate);
  }
  return api.isSpanContextValid(spanContext) ? spanContext : undefined;
}

export interface SpanOptions {
  kind: "producer" | "consumer";
  attributes: Record<string, string | number>;
  /** A remote parent: the span becomes its child (the consumer continuing the producer's trace). */
  parent?: SpanContext | undefined;
  links?: readonly Link[];
}

/**
 * Runs `work` inside a span of this package's tracer, active for what `work` calls (a handler's own spans become
 * its children), ended when `work` settles; a throw is recorded and rethrown. Without OpenTelemetry, `work` runs
 * as it is, with no span.
 */
export async function inSpan<T>(
  api: Api | undefined,
  name: string,
  options: SpanOptions,
  work: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (api === undefined) return work(undefined);
  const tracer: Tracer = api.trace.getTracer(TRACER_NAME);
  const active = api.context.active();
  const parent: Context =
    options.parent === undefined ? active : api.trace.setSpanContext(api.ROOT_CONTEXT, options.parent);
  const links = [...(options.links ?? [])];
  // The span continuing the producer's trace links the invocation it runs in (Lambda's own span, when an
  // instrumentation started one), so that invocation's trace still finds its records.
  const invocation = options.parent === undefined ? undefined : api.trace.getSpan(active)?.spanContext();
  if (invocation !== undefined && api.isSpanContextValid(invocation)) links.push({ context: invocation });
  const kind: SpanKind = options.kind === "producer" ? api.SpanKind.PRODUCER : api.SpanKind.CONSUMER;
  return tracer.startActiveSpan(
    name,
    { kind, attributes: options.attributes, links },
    parent,
    async (span) => {
      try {
        return await work(span);
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: (error as Error).message });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
