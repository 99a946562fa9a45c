// Types only: each SDK client is imported when a destination first needs it (Clients below), so the relay's entry
// point loads the clients of the destinations it is given and no others.
import type { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type { KinesisClient } from "@aws-sdk/client-kinesis";
import type { S3Client } from "@aws-sdk/client-s3";
import type { SNSClient } from "@aws-sdk/client-sns";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { awsHttpOptions } from "../util/awsClient.ts";
import { claimCheckDestination } from "./claimCheck/claimCheck.ts";
import type { ClaimCheckSetting } from "./claimCheck/settings.ts";
import type { Destination } from "./destination.ts";
import { eventBridgeDestination, eventBridgeMaxRequestBytes } from "./eventBridge/eventBridge.ts";
import { routingDestination } from "./routing/router.ts";
import type { DestinationSetting } from "./setting.ts";
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
 * Builds the clients and the destination a setting names; call it once per container or process. Async because
 * it imports the SDK clients the setting needs, and only those (an SQS-only relay loads no SNS, Kinesis,
 * EventBridge or S3 client: the six together took 1.36 s to import). The SDK's own
 * retries are kept short: the relay's backoff, not the SDK's, decides when a failed row is tried again. The
 * agent gets a socket per request in flight, and SQS's per-body MD5 check is off: TLS already guarantees integrity, and it cost ~5-8 us of the
 * relay's ~55 us of CPU per event (bench, docs/benchmarks.md). A route table gets one client per service it
 * uses, shared by its routes, and one destination per distinct place.
 */
export async function createDestination(
  setting: DestinationSetting,
  options: DestinationClientOptions,
): Promise<CreatedDestination> {
  const clients = new Clients(options);
  const build = async (target: TargetSetting): Promise<Destination> => {
    switch (target.kind) {
      case "eventbridge":
        // 1 MB per request in the `aws` partition, 256 KB where the partition's documentation still says so.
        return eventBridgeDestination(await clients.eventBridge(), {
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
        const sqs = await clients.sqs();
        return target.kind === "sqs-fifo"
          ? sqsFifoDestination(sqs, queue)
          : sqsStandardDestination(sqs, queue);
      }
      case "sns-fifo":
      case "sns": {
        const { snsDestination } = await import("./sns/sns.ts");
        return snsDestination(await clients.sns(), {
          topicArn: target.topicArn,
          fifo: target.kind === "sns-fifo",
          maxMessageBytes: target.maxMessageBytes,
          ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        });
      }
      case "kinesis": {
        const { kinesisDestination } = await import("./kinesis/kinesis.ts");
        return kinesisDestination(await clients.kinesis(), {
          stream: target.stream,
          ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        });
      }
    }
  };
  const withClaimCheck = async (destination: Destination): Promise<Destination> => {
    const claimCheck = options.claimCheck;
    if (claimCheck === undefined) return destination;
    const { s3PayloadStore } = await import("./claimCheck/s3Store.ts");
    return claimCheckDestination(
      destination,
      s3PayloadStore(await clients.s3(), claimCheck.bucket),
      claimCheck,
    );
  };
  if (setting.kind !== "routes") {
    return { destination: await withClaimCheck(await build(setting)), destroy: () => clients.destroy() };
  }
  // One destination per distinct place, so routes to one queue share its lane (and its requests).
  const places = new Map<string, Promise<Destination>>();
  const place = (target: TargetSetting) => {
    const key = JSON.stringify(target);
    const known = places.get(key);
    if (known !== undefined) return known;
    const created = build(target);
    places.set(key, created);
    return created;
  };
  const routes = await Promise.all(
    setting.routes.map(async (route) => ({
      match: route.match,
      destination: await place(route.destination),
    })),
  );
  const fallback = setting.fallback === undefined ? undefined : await place(setting.fallback);
  return {
    destination: await withClaimCheck(routingDestination(routes, fallback)),
    destroy: () => clients.destroy(),
  };
}

/** One SDK client per service, imported and made when first needed, all with the same bounds. */
class Clients {
  readonly #common;
  #sqs: Promise<SQSClient> | undefined;
  #sns: Promise<SNSClient> | undefined;
  #kinesis: Promise<KinesisClient> | undefined;
  #eventBridge: Promise<EventBridgeClient> | undefined;
  #s3: Promise<S3Client> | undefined;
  readonly #made: { destroy(): void }[] = [];
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

  #keep<T extends { destroy(): void }>(client: T): T {
    this.#made.push(client);
    return client;
  }

  sqs(): Promise<SQSClient> {
    this.#sqs ??= import("./sqs/sdkExports.ts").then(({ SQSClient }) =>
      this.#keep(new SQSClient({ ...this.#common, md5: false })),
    );
    return this.#sqs;
  }

  sns(): Promise<SNSClient> {
    this.#sns ??= import("./sns/sdkExports.ts").then(({ SNSClient }) =>
      this.#keep(new SNSClient(this.#common)),
    );
    return this.#sns;
  }

  kinesis(): Promise<KinesisClient> {
    // Kinesis's client defaults to HTTP/2 (for SubscribeToShard), which ignores the agents' socket sizing and
    // cannot reach an emulator over plain http: PutRecords is an ordinary request, sent over HTTP/1.1 like the rest.
    this.#kinesis ??= import("./kinesis/sdkExports.ts").then(({ KinesisClient, NodeHttpHandler }) =>
      this.#keep(
        new KinesisClient({
          ...this.#common,
          requestHandler: new NodeHttpHandler(this.#common.requestHandler),
        }),
      ),
    );
    return this.#kinesis;
  }

  eventBridge(): Promise<EventBridgeClient> {
    this.#eventBridge ??= import("./eventBridge/sdkExports.ts").then(({ EventBridgeClient }) =>
      this.#keep(new EventBridgeClient(this.#common)),
    );
    return this.#eventBridge;
  }

  s3(): Promise<S3Client> {
    // An emulator (moto, LocalStack) answers on one host: path-style addressing, not a bucket subdomain.
    this.#s3 ??= import("./claimCheck/sdkExports.ts").then(({ S3Client }) =>
      this.#keep(new S3Client({ ...this.#common, forcePathStyle: this.#endpoint !== undefined })),
    );
    return this.#s3;
  }

  destroy(): void {
    for (const client of this.#made) client.destroy();
  }
}
