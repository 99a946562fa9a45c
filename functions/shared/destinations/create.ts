import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SQSClient } from "@aws-sdk/client-sqs";
import { awsHttpOptions } from "../util/awsClient.ts";
import type { Destination } from "./destination.ts";
import { eventBridgeDestination, eventBridgeMaxRequestBytes } from "./eventBridge/eventBridge.ts";
import type { DestinationSetting } from "./setting.ts";
import { sqsFifoDestination } from "./sqs/sqsFifo.ts";

export interface DestinationClientOptions {
  /**
   * Publish requests in flight at once: RELAY_CONCURRENCY per round times RELAY_PARALLEL_ROUNDS. The agent gets a
   * socket for each (fewer would leave requests queued for one inside the publish timeout; the SDK's default of
   * 50 would cap the product).
   */
  sockets: number;
  /** One request's timeout (the round's publish timeout). */
  requestTimeoutMs: number;
  /** An emulator's URL; default: the SDK's (AWS_ENDPOINT_URL_SQS / _EVENTBRIDGE / AWS_ENDPOINT_URL, or AWS). */
  endpoint?: string;
  region?: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export interface CreatedDestination {
  destination: Destination;
  /** Closes the client's sockets (long-running processes; a Lambda keeps its client for the container). */
  destroy(): void;
}

/**
 * Builds the client and the destination a setting names; call it once per container or process. The SDK's own
 * retries are kept short: the relay's backoff, not the SDK's, decides when a failed row is tried again. The
 * agent gets a socket per request in flight, and SQS's per-body MD5 check is off: TLS already guarantees integrity, and it cost ~5-8 us of the
 * relay's ~55 us of CPU per event (bench, docs/benchmarks.md).
 */
export function createDestination(
  setting: DestinationSetting,
  options: DestinationClientOptions,
): CreatedDestination {
  const common = {
    maxAttempts: 3,
    // A connect timeout, and a request timeout that throws (not only warns) and also bounds a silent socket.
    requestHandler: awsHttpOptions({ requestTimeoutMs: options.requestTimeoutMs, sockets: options.sockets }),
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
  };
  if (setting.kind === "eventbridge") {
    const client = new EventBridgeClient(common);
    // 1 MB per request in the `aws` partition, 256 KB where the partition's documentation still says so.
    const maxRequestBytes = eventBridgeMaxRequestBytes(
      setting.eventBusName,
      options.region ?? process.env.AWS_REGION,
    );
    return {
      destination: eventBridgeDestination(client, { ...setting, maxRequestBytes }),
      destroy: () => client.destroy(),
    };
  }
  const client = new SQSClient({ ...common, md5: false });
  return {
    destination: sqsFifoDestination(client, {
      ...setting,
      ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    }),
    destroy: () => client.destroy(),
  };
}
