/**
 * The infrastructure of `npm start`: a Postgres and an SQS FIFO queue. Nothing to configure: an embedded
 * Postgres and a local SQS endpoint (LocalStack when Docker answers, else moto) are started and thrown away.
 * DATABASE_URL, AWS_ENDPOINT_URL and OUTBOX_QUEUE_URL, when set, are used instead.
 *
 * With `--destination eventbridge`: an event bus, a rule matching the relay's source and a standard queue as
 * its target, which the demo consumer reads; on AWS_ENDPOINT_URL when set, else on LocalStack when Docker
 * answers, else on the in-process endpoint (backendsProcess.ts says why not moto). OUTBOX_QUEUE_URL is not used.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  DeleteRuleCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SQSClient,
  type SQSClientConfig,
} from "@aws-sdk/client-sqs";
import type { Env } from "../../functions/shared/util/env.ts";
import { LOCAL_AWS } from "../backends/awsEndpoint.ts";
import type { BackendsReport } from "./backendsProcess.ts";

const BACKENDS_PROCESS = fileURLToPath(new URL("./backendsProcess.ts", import.meta.url));

export interface DemoBackends {
  databaseUrl: string;
  /** "env", "testcontainers" or "embedded-postgres". */
  postgresSource: string;
  /** The SQS endpoint; undefined means the SDK's default for the region (a real AWS queue). */
  sqsEndpoint: string | undefined;
  sqsSource: string;
  /** The queue the consumer reads: the relay's FIFO queue, or the bus rule's target. */
  queueUrl: string;
  /** With `--destination eventbridge`: the bus the relay publishes to and the source its rule matches. */
  eventBus?: { name: string; source: string };
  /** Region and credentials for every SQS client of the demo (the relay process gets them as env). */
  aws: { region?: string; accessKeyId?: string; secretAccessKey?: string };
  sqsClient(endpoint?: string): SQSClient;
  stop(): Promise<void>;
}

export type DemoDestination = "sqs" | "eventbridge";

/** The demo's events' source, which its rule matches (OUTBOX_EVENT_SOURCE when set, as the relay reads it). */
const DEMO_EVENT_SOURCE = "outbox-demo.orders";

export async function startBackends(
  env: Env,
  say: (line: string) => void,
  destination: DemoDestination = "sqs",
): Promise<DemoBackends> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const step of stops.splice(0).reverse()) await step().catch(() => {});
  };
  try {
    const bus = destination === "eventbridge";
    const queueGiven = !bus && env.OUTBOX_QUEUE_URL !== undefined && env.OUTBOX_QUEUE_URL !== "";
    const needPostgres = !env.DATABASE_URL;
    const needSqs = !queueGiven && !env.AWS_ENDPOINT_URL;
    const postgresPlan = needPostgres
      ? "starting Postgres (embedded unless Docker answers)"
      : "using DATABASE_URL";
    const sqsPlan = queueGiven
      ? "using OUTBOX_QUEUE_URL"
      : needSqs
        ? bus
          ? "starting a local EventBridge + SQS endpoint (LocalStack, else the in-process one)"
          : "starting a local SQS endpoint (LocalStack or moto)"
        : `using the ${bus ? "EventBridge/SQS" : "SQS"} endpoint at ${env.AWS_ENDPOINT_URL}`;
    say(`${postgresPlan}; ${sqsPlan}…`);
    let started: BackendsReport = {};
    if (needPostgres || needSqs) {
      const servers = await startServersProcess([
        ...(needPostgres ? ["postgres"] : []),
        ...(needSqs ? [bus ? "events" : "sqs"] : []),
      ]);
      stops.push(servers.stop);
      started = servers.report;
    }
    const databaseUrl = started.postgres?.url ?? (env.DATABASE_URL as string);
    const sqsEndpoint = started.sqs?.url ?? (env.AWS_ENDPOINT_URL || undefined);

    // Emulators accept any credentials; a real queue (OUTBOX_QUEUE_URL without an endpoint) uses the SDK's chain.
    const local = sqsEndpoint !== undefined;
    const aws = {
      region: env.AWS_REGION ?? (local ? LOCAL_AWS.region : undefined),
      accessKeyId: env.AWS_ACCESS_KEY_ID ?? (local ? LOCAL_AWS.credentials.accessKeyId : undefined),
      secretAccessKey:
        env.AWS_SECRET_ACCESS_KEY ?? (local ? LOCAL_AWS.credentials.secretAccessKey : undefined),
    };
    const sqsClient = (endpoint = sqsEndpoint) => new SQSClient(clientConfig(aws, endpoint));

    let queueUrl = env.OUTBOX_QUEUE_URL ?? "";
    let eventBus: DemoBackends["eventBus"];
    if (!queueGiven) {
      const sqs = sqsClient();
      queueUrl = await createDemoQueue(sqs, bus ? "standard" : "fifo");
      stops.push(async () => {
        await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => {});
        sqs.destroy();
      });
      if (bus) {
        const events = new EventBridgeClient(clientConfig(aws, sqsEndpoint));
        const source = env.OUTBOX_EVENT_SOURCE || DEMO_EVENT_SOURCE;
        const { queueArn } = await queueAttributes(sqs, queueUrl);
        const route = await createDemoBus(events, source, queueArn);
        stops.push(async () => {
          await route.remove().catch(() => {});
          events.destroy();
        });
        eventBus = { name: route.busName, source };
      }
    }
    return {
      ...(eventBus === undefined ? {} : { eventBus }),
      databaseUrl,
      postgresSource: started.postgres?.source ?? "env",
      sqsEndpoint,
      sqsSource: started.sqs?.source ?? "env",
      queueUrl,
      aws,
      sqsClient,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Starts local/demo/backendsProcess.ts out of this process group and waits for its report. */
async function startServersProcess(
  what: string[],
): Promise<{ report: BackendsReport; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [BACKENDS_PROCESS, ...what], {
    detached: true,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    child.stdin?.end(); // the servers stop when their stdin ends
    const stopped = await Promise.race([exited.then(() => true), delay(20_000).then(() => false)]);
    if (!stopped) child.kill("SIGKILL");
  };
  const report = await firstLine(child).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  if (report.error !== undefined) {
    await stop();
    throw new Error(
      `${report.error}\nnpm start needs a Postgres and an SQS endpoint: start a Docker engine (Postgres and ` +
        "LocalStack via testcontainers), or let it use embedded-postgres and moto (`pip install 'moto[server]'`), " +
        "or point DATABASE_URL and AWS_ENDPOINT_URL / OUTBOX_QUEUE_URL at running ones.",
    );
  }
  return { report, stop };
}

function firstLine(child: ChildProcess): Promise<BackendsReport> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.once("line", (line) => {
      lines.close();
      try {
        resolve(JSON.parse(line) as BackendsReport);
      } catch {
        reject(new Error(`unexpected output from the servers process: ${line}`));
      }
    });
    child.once("exit", (code) =>
      reject(new Error(`the servers process exited with code ${code} before reporting`)),
    );
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Region, credentials and endpoint: the same for the SQS and the EventBridge client. */
function clientConfig(
  aws: DemoBackends["aws"],
  endpoint: string | undefined,
): Pick<SQSClientConfig, "region" | "credentials" | "endpoint"> & { endpoint?: string } {
  return {
    ...(aws.region === undefined ? {} : { region: aws.region }),
    ...(aws.accessKeyId === undefined || aws.secretAccessKey === undefined
      ? {}
      : { credentials: { accessKeyId: aws.accessKeyId, secretAccessKey: aws.secretAccessKey } }),
    ...(endpoint === undefined ? {} : { endpoint }),
  };
}

/**
 * A FIFO queue that takes what the relay sends: 1 MiB messages (the attribute still defaults to 256 KiB). For a
 * bus, a standard queue as the rule's target: a FIFO target would add nothing, the bus having no order to keep.
 */
async function createDemoQueue(sqs: SQSClient, kind: "fifo" | "standard"): Promise<string> {
  const name = `outbox-demo-${randomBytes(3).toString("hex")}`;
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand(
      kind === "fifo"
        ? {
            QueueName: `${name}.fifo`,
            Attributes: { FifoQueue: "true", MaximumMessageSize: "1048576", VisibilityTimeout: "30" },
          }
        : { QueueName: name, Attributes: { MaximumMessageSize: "1048576", VisibilityTimeout: "30" } },
    ),
  );
  if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
  return QueueUrl;
}

async function queueAttributes(sqs: SQSClient, queueUrl: string): Promise<{ queueArn: string }> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  if (Attributes?.QueueArn === undefined)
    throw new Error(`GetQueueAttributes returned no QueueArn for ${queueUrl}`);
  return { queueArn: Attributes.QueueArn };
}

/**
 * A bus with one rule, `{"source": [source]}`, whose target is the consumer's queue: how a consuming service
 * subscribes to the relay's events. (On AWS the queue's policy must also let events.amazonaws.com send to it;
 * the emulators do not check, and the demo never runs against a real account.)
 */
async function createDemoBus(
  events: EventBridgeClient,
  source: string,
  queueArn: string,
): Promise<{ busName: string; remove(): Promise<void> }> {
  const busName = `outbox-demo-${randomBytes(3).toString("hex")}`;
  const rule = "outbox-demo-to-consumer";
  await events.send(new CreateEventBusCommand({ Name: busName }));
  await events.send(
    new PutRuleCommand({
      Name: rule,
      EventBusName: busName,
      EventPattern: JSON.stringify({ source: [source] }),
    }),
  );
  await events.send(
    new PutTargetsCommand({
      Rule: rule,
      EventBusName: busName,
      Targets: [{ Id: "consumer", Arn: queueArn }],
    }),
  );
  return {
    busName,
    async remove() {
      // Each step on its own: the in-process endpoint implements only what the relay and this demo need.
      const ignore = () => {};
      await events
        .send(new RemoveTargetsCommand({ Rule: rule, EventBusName: busName, Ids: ["consumer"] }))
        .catch(ignore);
      await events.send(new DeleteRuleCommand({ Name: rule, EventBusName: busName })).catch(ignore);
      await events.send(new DeleteEventBusCommand({ Name: busName })).catch(ignore);
    },
  };
}
