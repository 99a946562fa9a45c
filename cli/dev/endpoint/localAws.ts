/**
 * `outbox dev`'s AWS: the in-process endpoint (cli/dev/aws: SQS, SNS, EventBridge, Kinesis on one URL, as
 * LocalStack and moto serve them), with what a consumer's side needs added (SNS subscriptions delivering to
 * queues, Kinesis reads), or an endpoint the user runs (`--aws-endpoint`: LocalStack, moto).
 */
import { SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { REGION } from "../aws/account.ts";
import { FakeSqsServer } from "../aws/sqsServer.ts";
import { requireFreePort } from "../portCheck.ts";
import { ReadableKinesis } from "./kinesisReads.ts";
import { SubscribingSns } from "./snsSubscriptions.ts";

/** Region and credentials the local endpoints accept: never real ones. */
export const LOCAL_AWS = {
  region: REGION,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
};

/** SQS FIFO's deduplication interval (Amazon SQS Developer Guide, "Exactly-once processing"). */
const DEDUP_WINDOW_MS = 5 * 60_000;

export interface LocalAws {
  /** The endpoint every AWS client of the app takes (AWS_ENDPOINT_URL). */
  url: string;
  /** "in-process" or "--aws-endpoint". */
  source: string;
  close(): Promise<void>;
}

class DevAwsServer extends FakeSqsServer {
  override readonly topics = new SubscribingSns();
  override readonly streams = new ReadableKinesis();
}

export async function startLocalAws(options: {
  endpoint: string | undefined;
  port: number;
}): Promise<LocalAws> {
  if (options.endpoint !== undefined) {
    return { url: options.endpoint, source: "--aws-endpoint", close: async () => {} };
  }
  await requireFreePort(options.port, "--port", "the local AWS endpoint");
  const server = new DevAwsServer(DEDUP_WINDOW_MS);
  await server.listen(options.port);
  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: server.url });
  server.topics.deliverWith(async (queueArn, message) => {
    const name = queueArn.slice(queueArn.lastIndexOf(":") + 1);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: server.queueUrl(name),
        MessageBody: message.body,
        MessageAttributes: Object.fromEntries(
          Object.entries(message.attributes).map(([key, value]) => [
            key,
            { DataType: "String", StringValue: value },
          ]),
        ),
        ...(message.groupId === undefined
          ? {}
          : { MessageGroupId: message.groupId, MessageDeduplicationId: message.dedupId }),
      }),
    );
  });
  return {
    url: server.url,
    source: "in-process",
    close: async () => {
      await server.topics.delivered();
      sqs.destroy();
      await server.close();
    },
  };
}
