import { parentPort } from "node:worker_threads";
import { startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import type { EndpointReply, EndpointRequest } from "./sqsEndpoint.ts";
import { watchThread } from "./threadPauses.ts";

const port = parentPort;
if (port === null) throw new Error("sqsEndpointWorker.ts runs as a worker thread (see sqsEndpoint.ts)");
const fake = await startFakeSqs();
let watch: ReturnType<typeof watchThread> | undefined;
port.on("message", (request: EndpointRequest) => {
  const reply: EndpointReply = { id: request.id };
  if (request.kind === "watch") {
    watch = watchThread();
  } else if (request.kind === "unwatch") {
    if (watch !== undefined) reply.pauses = watch.stop();
    watch = undefined;
  } else if (request.kind === "latency") {
    fake.setFaults({ latencyMs: request.ms });
  } else if (request.kind === "cpu") {
    const usage = process.threadCpuUsage();
    reply.cpuMs = (usage.user + usage.system) / 1000;
  } else {
    // SQS and SNS messages carry the outbox id as an attribute (and a FIFO one as their dedup id); EventBridge
    // events and Kinesis records carry it in the envelope (destinations/envelope.ts).
    const outboxIdOf = (envelope: string) =>
      String((JSON.parse(envelope) as { outboxId?: unknown }).outboxId ?? "");
    reply.deliveries = [
      ...fake.deliveries().map((delivery) => ({
        dedupId: delivery.dedupId ?? delivery.attributes.outboxId ?? "",
        at: delivery.at,
      })),
      ...fake.events.events().map((event) => ({ dedupId: outboxIdOf(event.detail), at: event.at })),
      ...fake.topics
        .published()
        .map((message) => ({ dedupId: message.attributes.outboxId ?? "", at: message.at })),
      ...fake.streams
        .records()
        .map((record) => ({ dedupId: outboxIdOf(record.data.toString()), at: record.at })),
    ];
    fake.clearDeliveries();
    fake.events.clearEvents();
    fake.topics.clear();
    fake.streams.clear();
  }
  port.postMessage(reply);
});
port.postMessage({ url: fake.url });
