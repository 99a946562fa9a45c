import type { Env } from "../util/env.ts";
import { integerSetting, readText, textSetting } from "../util/settings.ts";

/**
 * Per-event-type lines per window at most (RELAY_METRICS_EVENT_TYPES). Each distinct eventType value is a custom
 * metric of its own, billed per metric-hour it appears in: a producer with thousands of event types failing
 * together would otherwise create thousands of metrics. The N types with the most failures in the window keep
 * their own line, the rest are summed under eventType "other".
 */
export const DEFAULT_METRICS_EVENT_TYPES = 10;

export const DEFAULT_METRICS_NAMESPACE = "OutboxRelay";

/**
 * The metrics' settings. The namespace and service variables are Powertools' own (Powertools for AWS Lambda
 * (TypeScript), Metrics, "Utility settings"): the construct writes them, createMetrics reads them.
 */
export const METRICS_SETTINGS = {
  namespace: textSetting({
    env: "POWERTOOLS_METRICS_NAMESPACE",
    default: DEFAULT_METRICS_NAMESPACE,
    doc: "CloudWatch namespace of the EMF metrics",
  }),
  serviceName: textSetting({
    env: "POWERTOOLS_SERVICE_NAME",
    default: undefined,
    doc: "the metrics' service dimension and the logs' service; unset: outbox-relay, outbox-purge, ...",
  }),
  maxEventTypes: integerSetting({
    env: "RELAY_METRICS_EVENT_TYPES",
    default: DEFAULT_METRICS_EVENT_TYPES,
    min: 0,
    max: 100,
    doc: "per-event-type PublishFailures lines per window; the rest are summed as other (0: totals only)",
  }),
} as const;

/** The service name logs and metrics carry: POWERTOOLS_SERVICE_NAME, else the job's own (outbox-relay, …). */
export function serviceNameFromEnv(env: Env, jobDefault: string): string {
  return readText(env, METRICS_SETTINGS.serviceName) ?? jobDefault;
}
