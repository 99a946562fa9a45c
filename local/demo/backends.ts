/**
 * The infrastructure of `npm start`: a Postgres and the destination of `--destination` (default an SQS FIFO
 * queue; cli/dev/destinations.ts creates each kind's resources). Nothing to configure: an embedded Postgres and a
 * local AWS endpoint (LocalStack when Docker answers, else moto, which delivers from SNS topics to subscribed
 * queues and serves Kinesis reads) are started and thrown away. DATABASE_URL, AWS_ENDPOINT_URL and (SQS FIFO
 * only) OUTBOX_QUEUE_URL, when set, are used instead.
 *
 * With `--destination eventbridge`: on AWS_ENDPOINT_URL when set, else on LocalStack when Docker answers, else on
 * the in-process endpoint (backendsProcess.ts says why not moto).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SQSClient } from "@aws-sdk/client-sqs";
import {
  createTarget,
  type LocalDestination as DemoDestination,
  type LocalTarget as DemoTarget,
  freshName,
  type TargetClients,
} from "../../cli/dev/destinations.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import { LOCAL_AWS } from "../backends/awsEndpoint.ts";
import type { BackendsReport } from "./backendsProcess.ts";

const BACKENDS_PROCESS = fileURLToPath(new URL("./backendsProcess.ts", import.meta.url));

export interface DemoBackends {
  databaseUrl: string;
  /** "env", "testcontainers" or "embedded-postgres". */
  postgresSource: string;
  /** The AWS endpoint; undefined means the SDK's default for the region (a real AWS queue). */
  sqsEndpoint: string | undefined;
  sqsSource: string;
  /** What the relay publishes to and the consumer reads (cli/dev/destinations.ts). */
  target: DemoTarget;
  /** Region and credentials for every AWS client of the demo (the relay process gets them as env). */
  aws: { region?: string; accessKeyId?: string; secretAccessKey?: string };
  /** The same, with the endpoint, as any AWS client of the demo takes it. */
  clientConfig: TargetClients["config"];
  sqsClient(endpoint?: string): SQSClient;
  stop(): Promise<void>;
}

export type { DemoDestination };

/** The demo's events' source, which its rule matches (OUTBOX_EVENT_SOURCE when set, as the relay reads it). */
const DEMO_EVENT_SOURCE = "outbox-demo.orders";

export async function startBackends(
  env: Env,
  say: (line: string) => void,
  destination: DemoDestination = "sqs-fifo",
): Promise<DemoBackends> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const step of stops.splice(0).reverse()) await step().catch(() => {});
  };
  try {
    const bus = destination === "eventbridge";
    const queueGiven =
      destination === "sqs-fifo" && env.OUTBOX_QUEUE_URL !== undefined && env.OUTBOX_QUEUE_URL !== "";
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
          : `starting a local ${destination === "kinesis" ? "Kinesis" : destination.startsWith("sns") ? "SNS + SQS" : "SQS"} endpoint (LocalStack or moto)`
        : `using the AWS endpoint at ${env.AWS_ENDPOINT_URL}`;
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

    const sqs = sqsClient();
    stops.push(async () => sqs.destroy());
    let target: DemoTarget;
    if (queueGiven) {
      const queueUrl = env.OUTBOX_QUEUE_URL as string;
      target = {
        consumerSource: { queueUrl },
        relayEnv: { OUTBOX_QUEUE_URL: queueUrl, OUTBOX_EVENT_BUS_NAME: undefined },
        resources: `queue: ${queueUrl}`,
        addresses: { OUTBOX_DEV_QUEUE_URL: queueUrl },
        path: "SQS FIFO",
        remove: async () => {},
      };
    } else {
      target = await createTarget(destination, {
        sqs,
        config: clientConfig(aws, sqsEndpoint),
        eventSource: env.OUTBOX_EVENT_SOURCE || DEMO_EVENT_SOURCE,
        name: freshName,
        visibilityTimeoutSeconds: 30,
      });
      stops.push(() => target.remove());
    }
    return {
      databaseUrl,
      postgresSource: started.postgres?.source ?? "env",
      sqsEndpoint,
      sqsSource: started.sqs?.source ?? "env",
      target,
      aws,
      clientConfig: clientConfig(aws, sqsEndpoint),
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

/** Region, credentials and endpoint: the same for every AWS client of the demo. */
function clientConfig(aws: DemoBackends["aws"], endpoint: string | undefined): TargetClients["config"] {
  return {
    ...(aws.region === undefined ? {} : { region: aws.region }),
    ...(aws.accessKeyId === undefined || aws.secretAccessKey === undefined
      ? {}
      : { credentials: { accessKeyId: aws.accessKeyId, secretAccessKey: aws.secretAccessKey } }),
    ...(endpoint === undefined ? {} : { endpoint }),
  };
}
