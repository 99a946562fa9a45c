import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { KinesisClient } from "@aws-sdk/client-kinesis";
import { S3Client } from "@aws-sdk/client-s3";
import { SNSClient } from "@aws-sdk/client-sns";
import { SQSClient } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { awsHttpOptions } from "../util/awsClient.ts";
import { claimCheckDestination } from "./claimCheck/claimCheck.ts";
import { s3PayloadStore } from "./claimCheck/s3Store.ts";
import type { ClaimCheckSetting } from "./claimCheck/settings.ts";
import type { Destination } from "./destination.ts";
import { eventBridgeDestination, eventBridgeMaxRequestBytes } from "./eventBridge/eventBridge.ts";
import { kinesisDestination } from "./kinesis/kinesis.ts";
import { routingDestination } from "./routing/router.ts";
import type { DestinationSetting } from "./setting.ts";
import { snsDestination } from "./sns/sns.ts";
import { sqsFifoDestination, sqsStandardDestination } from "./sqs/sqsFifo.ts";
import type { TargetSetting } from "./targets.ts";

export interface DestinationClientOptions {
  /**
   * Publish requests in flight at once: RELAY_CONCURRENCY per round times RELAY_PARALLEL_ROUNDS. The agent gets a
   * socket for each (fewer would leave requests queued for one inside the publish timeout; the SDK's default of
   * 50 would cap the product).
   */
  sockets: number;
  /** One request's timeout (the round's publish timeout). */
  requestTimeoutMs: number;
  /**
   * An emulator's URL, for every service; default: the SDK's (AWS_ENDPOINT_URL_SQS / _SNS / _KINESIS /
   * _EVENTBRIDGE / AWS_ENDPOINT_URL, or AWS).
   */
  endpoint?: string;
  region?: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Payloads too large for the destination go through this bucket (claimCheck/); absent: off. */
  claimCheck?: ClaimCheckSetting;
}

export interface CreatedDestination {
  destination: Destination;
  /** Closes the client's sockets (long-running processes; a Lambda keeps its client for the container). */
  destroy(): void;
}

/**
 * Builds the clients and the destination a setting names; call it once per container or process. The SDK's own
 * retries are kept short: the relay's backoff, not the SDK's, decides when a failed row is tried again. The
 * agent gets a socket per request in flight, and SQS's per-body MD5 check is off: TLS already guarantees integrity, and it cost ~5-8 us of the
 * relay's ~55 us of CPU per event (bench, docs/benchmarks.md). A route table gets one client per service it
 * uses, shared by its routes, and one destination per distinct place.
 */
export function createDestination(
  setting: DestinationSetting,
  options: DestinationClientOptions,
): CreatedDestination {
  const clients = new Clients(options);
  const build = (target: TargetSetting): Destination => {
    switch (target.kind) {
      case "eventbridge":
        // 1 MB per request in the `aws` partition, 256 KB where the partition's documentation still says so.
        return eventBridgeDestination(clients.eventBridge(), {
          ...target,
          maxRequestBytes: eventBridgeMaxRequestBytes(
            target.eventBusName,
            options.region ?? process.env.AWS_REGION,
          ),
        });
      case "sqs-fifo":
      case "sqs": {
        const queue = {
          queueUrl: target.queueUrl,
          maxMessageBytes: target.maxMessageBytes,
          ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        };
        return target.kind === "sqs-fifo"
          ? sqsFifoDestination(clients.sqs(), queue)
          : sqsStandardDestination(clients.sqs(), queue);
      }
      case "sns-fifo":
      case "sns":
        return snsDestination(clients.sns(), {
          topicArn: target.topicArn,
          fifo: target.kind === "sns-fifo",
          maxMessageBytes: target.maxMessageBytes,
          ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        });
      case "kinesis":
        return kinesisDestination(clients.kinesis(), {
          stream: target.stream,
          ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        });
    }
  };
  const withClaimCheck = (destination: Destination): Destination => {
    const claimCheck = options.claimCheck;
    if (claimCheck === undefined) return destination;
    return claimCheckDestination(destination, s3PayloadStore(clients.s3(), claimCheck.bucket), claimCheck);
  };
  if (setting.kind !== "routes") {
    return { destination: withClaimCheck(build(setting)), destroy: () => clients.destroy() };
  }
  // One destination per distinct place, so routes to one queue share its lane (and its requests).
  const places = new Map<string, Destination>();
  const place = (target: TargetSetting) => {
    const key = JSON.stringify(target);
    const known = places.get(key);
    if (known !== undefined) return known;
    const created = build(target);
    places.set(key, created);
    return created;
  };
  const routes = setting.routes.map((route) => ({
    match: route.match,
    destination: place(route.destination),
  }));
  const fallback = setting.fallback === undefined ? undefined : place(setting.fallback);
  return {
    destination: withClaimCheck(routingDestination(routes, fallback)),
    destroy: () => clients.destroy(),
  };
}

/** One SDK client per service, made when first needed, all with the same bounds. */
class Clients {
  readonly #common;
  #sqs: SQSClient | undefined;
  #sns: SNSClient | undefined;
  #kinesis: KinesisClient | undefined;
  #eventBridge: EventBridgeClient | undefined;
  #s3: S3Client | undefined;
  readonly #endpoint: string | undefined;

  constructor(options: DestinationClientOptions) {
    this.#endpoint = options.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
    this.#common = {
      maxAttempts: 3,
      // A connect timeout, and a request timeout that throws (not only warns) and also bounds a silent socket.
      requestHandler: awsHttpOptions({
        requestTimeoutMs: options.requestTimeoutMs,
        sockets: options.sockets,
      }),
      ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
      ...(options.region === undefined ? {} : { region: options.region }),
      ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    };
  }

  sqs(): SQSClient {
    this.#sqs ??= new SQSClient({ ...this.#common, md5: false });
    return this.#sqs;
  }

  sns(): SNSClient {
    this.#sns ??= new SNSClient(this.#common);
    return this.#sns;
  }

  kinesis(): KinesisClient {
    // Kinesis's client defaults to HTTP/2 (for SubscribeToShard), which ignores the agents' socket sizing and
    // cannot reach an emulator over plain http: PutRecords is an ordinary request, sent over HTTP/1.1 like the rest.
    this.#kinesis ??= new KinesisClient({
      ...this.#common,
      requestHandler: new NodeHttpHandler(this.#common.requestHandler),
    });
    return this.#kinesis;
  }

  eventBridge(): EventBridgeClient {
    this.#eventBridge ??= new EventBridgeClient(this.#common);
    return this.#eventBridge;
  }

  s3(): S3Client {
    // An emulator (moto, LocalStack) answers on one host: path-style addressing, not a bucket subdomain.
    this.#s3 ??= new S3Client({ ...this.#common, forcePathStyle: this.#endpoint !== undefined });
    return this.#s3;
  }

  destroy(): void {
    for (const client of [this.#sqs, this.#sns, this.#kinesis, this.#eventBridge, this.#s3])
      client?.destroy();
  }
}
