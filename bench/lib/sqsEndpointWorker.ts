import { parentPort } from "node:worker_threads";
import { startFakeSqs } from "../../local/fakes/fakeSqs.ts";
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
    // SQS sends carry the outbox id as their dedup id; EventBridge events carry it in the detail's envelope.
    reply.deliveries = [
      ...fake.deliveries().map((delivery) => ({ dedupId: delivery.dedupId ?? "", at: delivery.at })),
      ...fake.events.events().map((event) => ({
        dedupId: String((JSON.parse(event.detail) as { outboxId?: unknown }).outboxId ?? ""),
        at: event.at,
      })),
    ];
    fake.clearDeliveries();
    fake.events.clearEvents();
  }
  port.postMessage(reply);
});
port.postMessage({ url: fake.url });
