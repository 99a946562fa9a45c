/**
 * `outbox dev`'s AWS: the in-process endpoint (cli/dev/aws: SQS, SNS with subscriptions to queues, EventBridge,
 * Kinesis and S3 on one URL, as LocalStack and moto serve them), or an endpoint the user runs (`--aws-endpoint`:
 * LocalStack, moto).
 */
import { REGION } from "./aws/account.ts";
import { startFakeSqs } from "./aws/fakeSqs.ts";
import { requireFreePort } from "./portCheck.ts";

/** Region and credentials the local endpoints accept: never real ones. */
export const LOCAL_AWS = {
  region: REGION,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
};

export interface LocalAws {
  /** The endpoint every AWS client of the app takes (AWS_ENDPOINT_URL). */
  url: string;
  /** "in-process" or "--aws-endpoint". */
  source: string;
  close(): Promise<void>;
}

export async function startLocalAws(options: {
  endpoint: string | undefined;
  port: number;
}): Promise<LocalAws> {
  if (options.endpoint !== undefined) {
    return { url: options.endpoint, source: "--aws-endpoint", close: async () => {} };
  }
  await requireFreePort(options.port, "--port", "the local AWS endpoint");
  // SQS FIFO's deduplication interval is 5 minutes (Amazon SQS Developer Guide, "Exactly-once processing"):
  // startFakeSqs's default.
  const server = await startFakeSqs({ port: options.port });
  return { url: server.url, source: "in-process", close: () => server.close() };
}
