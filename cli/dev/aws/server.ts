/**
 * The HTTP endpoint: one server on 127.0.0.1 that takes every request, routes `AmazonSQS.*` to the SQS
 * service, `AWSEvents.*` to EventBridge (eventBridge.ts), `Kinesis_20131202.*` to Kinesis (kinesis.ts),
 * requests signed for `s3` to S3 (s3.ts) and form-encoded awsQuery requests (`Action=...`) to SNS (sns.ts): one
 * URL for all, as moto and LocalStack do. It applies the request-level faults around the handling: latency, an
 * outage, throttling, a failed request, a dropped response. It counts requests and their failures, and is the FakeSqs handle tests and the bench hold.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { EventBridgeService } from "./eventBridge.ts";
import {
  defaultFaults,
  dropsResponse,
  type Faults,
  latencyOf,
  type Outage,
  type RequestInfo,
  requestFault,
} from "./faults.ts";
import { KinesisService } from "./kinesis.ts";
import { MAX_OBJECT_BYTES, S3Error, S3Service, writeS3Answer, writeS3Error } from "./s3.ts";
import { ServiceError } from "./serviceError.ts";
import { parseForm, SnsError, SnsService, writeSnsError, writeSnsOutput } from "./sns.ts";
import type { QueueDepth } from "./sqsQueue.ts";
import { type Delivery, emptyStats, type FakeSqsStats, SqsService } from "./sqsService.ts";
import {
  parseInput,
  parseTarget,
  queueNameOf,
  readBody,
  SqsError,
  writeError,
  writeOutput,
} from "./sqsWire.ts";

const THROTTLE_CODES = new Set(["ThrottlingException", "RequestThrottled"]);

export interface FakeSqs {
  readonly url: string;
  /** Live fault settings; assign fields at any time or use setFaults/resetFaults. */
  readonly faults: Faults;
  readonly stats: FakeSqsStats;
  /** The EventBridge side of this endpoint (`AWSEvents.*` requests): buses, rules to queues, entry faults. */
  readonly events: EventBridgeService;
  /** The SNS side (topics, SQS subscriptions, Publish and PublishBatch): what was published. */
  readonly topics: SnsService;
  /** The Kinesis side (CreateStream, PutRecords): what was put. */
  readonly streams: KinesisService;
  /** The S3 side (buckets and objects, for the claim check). */
  readonly buckets: S3Service;
  /** FIFO deduplication window; may be changed at runtime. */
  dedupWindowMs: number;
  setFaults(partial: Partial<Faults>): void;
  resetFaults(): void;
  /** Accepted sends in arrival order, optionally of one queue (a copy). */
  deliveries(queueName?: string): Delivery[];
  clearDeliveries(): void;
  resetStats(): void;
  queueUrl(queueName: string): string;
  queueDepth(queueName: string): QueueDepth | undefined;
  /** Until up(): `reset` destroys every connection on arrival (a network error to the SDK), `unavailable` answers 503. */
  down(mode?: Outage): void;
  up(): void;
  close(): Promise<void>;
}

export class LocalAwsServer implements FakeSqs {
  url = "";
  readonly faults: Faults = defaultFaults();
  readonly stats: FakeSqsStats = emptyStats();
  private readonly sqs: SqsService;
  private downMode: Outage | undefined;
  private readonly server = createServer((req, res) => void this.handle(req, res));
  readonly events = new EventBridgeService((queueName, body, options) => {
    this.sqs.sendMessage({
      QueueUrl: this.queueUrl(queueName),
      MessageBody: body,
      MessageGroupId: options.groupId,
      MessageDeduplicationId: options.groupId === undefined ? undefined : options.dedupId,
      ...(options.traceHeader === undefined
        ? {}
        : {
            MessageSystemAttributes: {
              AWSTraceHeader: { DataType: "String", StringValue: options.traceHeader },
            },
          }),
    });
  });

  /** A topic's subscriptions deliver to this endpoint's queues; a queue that is gone loses the message, as in SNS. */
  readonly topics = new SnsService(
    (queueArn, message) => {
      try {
        this.sqs.sendMessage({
          QueueUrl: this.queueUrl(queueArn.slice(queueArn.lastIndexOf(":") + 1)),
          MessageBody: message.body,
          MessageGroupId: message.groupId,
          MessageDeduplicationId: message.dedupId,
          MessageAttributes: message.attributes,
        });
      } catch (error) {
        if (!(error instanceof SqsError)) throw error;
      }
    },
    () => this.sqs.dedupWindowMs,
  );
  readonly streams = new KinesisService();
  readonly buckets = new S3Service();

  constructor(dedupWindowMs: number) {
    this.sqs = new SqsService(dedupWindowMs, this.stats, this.faults, () => this.url);
    // The SDK keeps connections alive; Node's 5 s default would close idle sockets under the client's feet.
    this.server.keepAliveTimeout = 65_000;
  }

  get dedupWindowMs(): number {
    return this.sqs.dedupWindowMs;
  }

  set dedupWindowMs(ms: number) {
    this.sqs.dedupWindowMs = ms;
  }

  listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, "127.0.0.1", () => {
        this.server.off("error", reject);
        this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
        resolve();
      });
    });
  }

  setFaults(partial: Partial<Faults>): void {
    Object.assign(this.faults, partial);
  }

  resetFaults(): void {
    Object.assign(this.faults, defaultFaults());
    this.events.failEntry = false;
  }

  deliveries(queueName?: string): Delivery[] {
    return this.sqs.deliveries(queueName);
  }

  clearDeliveries(): void {
    this.sqs.clearDeliveries();
  }

  resetStats(): void {
    Object.assign(this.stats, emptyStats());
  }

  queueUrl(queueName: string): string {
    return this.sqs.queueUrl(queueName);
  }

  queueDepth(queueName: string): QueueDepth | undefined {
    return this.sqs.queueDepth(queueName);
  }

  down(mode: Outage = "reset"): void {
    this.downMode = mode;
  }

  up(): void {
    this.downMode = undefined;
  }

  async close(): Promise<void> {
    this.sqs.close();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const n = ++this.stats.requests;
    if (this.refused(req)) return;
    if (isS3(req)) return this.handleS3(req, res, n);
    let input: Record<string, unknown>;
    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch {
      return; // the client went away mid-request
    }
    if (String(req.headers["content-type"]).startsWith("application/x-www-form-urlencoded")) {
      return this.handleSns(req, res, parseForm(raw), n);
    }
    const { service, action } = parseTarget(req.headers["x-amz-target"]);
    try {
      input = parseInput(raw);
    } catch (error) {
      return this.fail(res, error as SqsError);
    }
    const request: RequestInfo = { action, queueName: queueNameOf(input), input, n };
    const { faults } = this;
    try {
      const latency = latencyOf(faults, action, request);
      if (latency > 0) await sleep(latency);
      if (this.refused(req)) return; // went down while the request waited
      const fault = requestFault(faults, this.downMode, action, request);
      if (fault) throw fault;

      const output =
        service === "AWSEvents"
          ? this.events.handle(action, input)
          : service === "Kinesis_20131202"
            ? this.streams.handle(action, input)
            : await this.sqs.dispatch(action, input, res);
      if (dropsResponse(faults, action, request)) {
        this.stats.droppedResponses++;
        req.socket.destroy();
        return;
      }
      writeOutput(res, output);
    } catch (error) {
      this.fail(
        res,
        error instanceof SqsError
          ? error
          : error instanceof ServiceError
            ? new SqsError(error.code, error.message, error.status)
            : new SqsError("InternalError", `Local AWS endpoint bug: ${String(error)}`),
      );
    }
  }

  /** SNS's awsQuery requests: the same request faults as the JSON services, answered in XML. */
  private async handleSns(
    req: IncomingMessage,
    res: ServerResponse,
    form: Map<string, string>,
    n: number,
  ): Promise<void> {
    const action = form.get("Action") ?? "";
    const request: RequestInfo = {
      action,
      queueName: form.get("TopicArn"),
      input: Object.fromEntries(form),
      n,
    };
    const { faults } = this;
    try {
      const latency = latencyOf(faults, action, request);
      if (latency > 0) await sleep(latency);
      if (this.refused(req)) return;
      const fault = requestFault(faults, this.downMode, action, request);
      if (fault) throw fault;
      const xml = this.topics.handle(action, form);
      if (dropsResponse(faults, action, request)) {
        this.stats.droppedResponses++;
        req.socket.destroy();
        return;
      }
      writeSnsOutput(res, xml);
    } catch (error) {
      const { code, message, status } =
        error instanceof ServiceError || error instanceof SqsError
          ? error
          : new SnsError("InternalError", `Local AWS endpoint bug: ${String(error)}`, 500);
      if (THROTTLE_CODES.has(code)) this.stats.throttled++;
      else this.stats.failedRequests++;
      // SNS's throttling code is `Throttled`, whatever the SQS-side code the faults are set to.
      writeSnsError(res, THROTTLE_CODES.has(code) ? "Throttled" : code, message, status);
    }
  }

  /** S3's REST requests: the same request faults, answered as S3 answers (XML errors, SlowDown for throttling). */
  private async handleS3(req: IncomingMessage, res: ServerResponse, n: number): Promise<void> {
    const method = req.method ?? "GET";
    const url = req.url ?? "/";
    const action = S3Service.actionOf(method, url, req.headers.host);
    const request: RequestInfo = {
      action,
      queueName: S3Service.bucketOf(url, req.headers.host),
      input: {},
      n,
    };
    const { faults } = this;
    try {
      S3Service.checkSize(req.headers);
      let body: Buffer;
      try {
        // The limit allows for aws-chunked framing around the largest object.
        body = await readBody(req, MAX_OBJECT_BYTES + 1_048_576);
      } catch {
        return; // the client went away mid-request
      }
      const latency = latencyOf(faults, action, request);
      if (latency > 0) await sleep(latency);
      if (this.refused(req)) return;
      const fault = requestFault(faults, this.downMode, action, request);
      if (fault) throw fault;
      const answer = this.buckets.handle({ method, url, headers: req.headers, body });
      if (dropsResponse(faults, action, request)) {
        this.stats.droppedResponses++;
        req.socket.destroy();
        return;
      }
      writeS3Answer(res, method, answer);
    } catch (error) {
      const failure =
        error instanceof S3Error
          ? error
          : error instanceof ServiceError || error instanceof SqsError
            ? THROTTLE_CODES.has(error.code)
              ? new S3Error("SlowDown", "Please reduce your request rate.", 503)
              : new S3Error(error.code, error.message, error.status)
            : new S3Error("InternalError", `Local AWS endpoint bug: ${String(error)}`, 500);
      if (failure.code === "SlowDown") this.stats.throttled++;
      else this.stats.failedRequests++;
      if (failure.code === "EntityTooLarge") res.shouldKeepAlive = false; // its body was not read
      writeS3Error(res, method, failure);
    }
  }

  /** down("reset"): the connection is destroyed unanswered, which the SDK sees as a network error. */
  private refused(req: IncomingMessage): boolean {
    if (this.downMode !== "reset") return false;
    this.stats.failedRequests++;
    req.socket.destroy();
    return true;
  }

  private fail(res: ServerResponse, error: SqsError): void {
    if (THROTTLE_CODES.has(error.code)) this.stats.throttled++;
    else this.stats.failedRequests++;
    writeError(res, error);
  }
}

/**
 * S3 is told apart by its signature's scope (`.../<region>/s3/aws4_request`, in the header or a presigned URL's
 * query), not by the shape of the request: a PutObject may carry any content type, JSON or form-encoded included.
 */
function isS3(req: IncomingMessage): boolean {
  const scope = req.headers.authorization ?? req.url ?? "";
  return /\/s3\/aws4_request/.test(scope) || /%2Fs3%2Faws4_request/i.test(scope);
}
