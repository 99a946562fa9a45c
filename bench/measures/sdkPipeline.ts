import { Readable } from "node:stream";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { LoadedRow } from "../../functions/shared/destinations/destination.ts";
import { sqsFifoDestination } from "../../functions/shared/destinations/sqs/sqsFifo.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

/**
 * The relay's SQS path without a network, a database or another thread: its own destination
 * (destinations/sqsFifo.ts: prepare, then SendMessageBatchCommand through the SDK's whole pipeline, client options
 * as destinations/create.ts sets them, MD5 check off) against a request handler in this thread that answers each
 * SendMessageBatch with every entry successful, in SQS's JSON protocol. What this costs per event is the floor of
 * the relay thread's CPU with the AWS SDK, whatever the engine around it does.
 *
 * Three measurements, interleaved, `rounds` times 250 events in waves of 25 requests as a round of the defaults:
 * `prepare` alone; the canned handler alone (parsing a request body like the SDK's and writing the response);
 * and prepare + send, from which the handler's share is subtracted.
 */
export interface SdkPipelineResult {
  events: number;
  /** Relay-thread CPU µs per event, one figure per interleaved repetition. */
  prepareUs: number[];
  sdkUs: number[];
  handlerUs: number[];
}

const BATCH = 250;
const TEXT = new TextDecoder();
const CONCURRENCY = 25;
const ENTRIES = 10;

/** An in-process SQS: answers SendMessageBatch with each entry's success, as the JSON protocol has it. */
class CannedSqsHandler {
  readonly metadata = { handlerProtocol: "http/1.1" };
  async handle(request: { body?: unknown }) {
    const body = request.body;
    return {
      response: cannedResponse(typeof body === "string" ? body : TEXT.decode(body as Uint8Array)),
    };
  }
  updateHttpClientConfig() {}
  httpHandlerConfigs() {
    return {};
  }
  destroy() {}
}

function cannedResponse(requestBody: string) {
  const { Entries } = JSON.parse(requestBody) as { Entries: { Id: string }[] };
  const body = JSON.stringify({
    Successful: Entries.map((entry, index) => ({
      Id: entry.Id,
      MessageId: `00000000-0000-4000-8000-${String(index).padStart(12, "0")}`,
      MD5OfMessageBody: "d41d8cd98f00b204e9800998ecf8427e",
      SequenceNumber: `1867${String(index).padStart(16, "0")}`,
    })),
    Failed: [],
  });
  return {
    statusCode: 200,
    reason: "OK",
    headers: {
      "content-type": "application/x-amz-json-1.0",
      "x-amzn-requestid": "8a3f0d8e-2b4c-4a51-9b0e-3c2f8e6a7d10",
      "content-length": String(Buffer.byteLength(body)),
    },
    body: Readable.from([Buffer.from(body)]),
  };
}

/** Rows as the bench's backlog holds them: a ~180-byte order payload and a traceparent header. */
function rows(count: number, offset: number): LoadedRow[] {
  return Array.from({ length: count }, (_, index) => {
    const n = offset + index;
    return {
      id: `0193a4c2-7b1e-7c3d-8e4f-${String(n).padStart(12, "0")}`,
      seq: String(1_000_000 + n),
      aggregate_type: "order",
      aggregate_id: `order-${n % 1000}`,
      event_type: "order.created",
      attempts: 0,
      transient_failures: 0,
      created_at: new Date(1_796_000_000_000 + n),
      payload: `{"sku": "SKU-${n}", "note": "bench event ${n}", "total": ${n % 997}.25, "lines": [{"qty": 2, "price": 19.99}, {"qty": 1, "price": 4.5}], "currency": "EUR"}`,
      headers: { traceparent: `00-${String(n).padStart(32, "0")}-00f067aa0ba902b7-01` },
    } as LoadedRow;
  });
}

const cpuUs = () => {
  const usage = process.threadCpuUsage();
  return usage.user + usage.system;
};

export async function measureSdkPipeline(rounds = 40, repetitions = 3): Promise<SdkPipelineResult> {
  const client = new SQSClient({
    ...LOCAL_AWS,
    endpoint: "http://127.0.0.1:1",
    maxAttempts: 3,
    md5: false,
    requestHandler: new CannedSqsHandler(),
  });
  const destination = sqsFifoDestination(client, { queueUrl: "http://127.0.0.1:1/123456789012/bench.fifo" });
  const events = rounds * BATCH;
  const result: SdkPipelineResult = { events, prepareUs: [], sdkUs: [], handlerUs: [] };
  type Ready = Exclude<ReturnType<typeof destination.prepare>, string>;
  const prepareAll = (round: number) =>
    rows(BATCH, round * BATCH).map((row) => destination.prepare(row) as Ready);
  // A request body as the SDK writes one, for the handler-alone measurement.
  let sampleBody = "";
  client.middlewareStack.add(
    (next) => async (args) => {
      const body = (args.request as { body?: unknown }).body;
      sampleBody = typeof body === "string" ? body : TEXT.decode(body as Uint8Array);
      return next(args);
    },
    { step: "finalizeRequest", name: "benchCaptureBody" },
  );
  const sendRound = async (round: number) => {
    const prepared = prepareAll(round);
    const batches: Ready[][] = [];
    for (let i = 0; i < prepared.length; i += ENTRIES) batches.push(prepared.slice(i, i + ENTRIES));
    for (let i = 0; i < batches.length; i += CONCURRENCY) {
      await Promise.all(batches.slice(i, i + CONCURRENCY).map((batch) => destination.send(batch)));
    }
  };
  // Warm-up, so the JIT has optimized the pipeline before anything is counted.
  for (let round = 0; round < rounds; round++) await sendRound(round);

  for (let repetition = 0; repetition < repetitions; repetition++) {
    let started = cpuUs();
    for (let round = 0; round < rounds; round++) prepareAll(round);
    result.prepareUs.push((cpuUs() - started) / events);

    started = cpuUs();
    for (let request = 0; request < events / ENTRIES; request++) {
      const response = cannedResponse(sampleBody);
      for await (const _chunk of response.body) {
        // drained, as the SDK reads it
      }
    }
    const handlerUs = (cpuUs() - started) / events;
    result.handlerUs.push(handlerUs);

    started = cpuUs();
    for (let round = 0; round < rounds; round++) await sendRound(round);
    result.sdkUs.push((cpuUs() - started) / events - handlerUs - (result.prepareUs.at(-1) ?? 0));
  }
  client.destroy();
  return result;
}
