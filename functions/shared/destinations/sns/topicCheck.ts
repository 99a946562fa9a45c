import type { SNSClient } from "@aws-sdk/client-sns";
import { ConfigError } from "../../outbox/errors.ts";
import { checkFailure } from "../checkFailure.ts";
import type { DestinationCheck } from "../destination.ts";
import { snsSdk } from "./sdk.ts";

/**
 * Asks SNS about the topic once before relaying (GetTopicAttributes, which needs sns:GetTopicAttributes): a topic
 * that does not exist (wrong ARN, region or account) would turn every publish into a retried failure, and a FIFO
 * topic under `sns` (or a standard one under `sns-fifo`) would lose the order or the deduplication the route
 * promised. The `.fifo` name is checked at cold start already (routes.ts); the `FifoTopic` attribute is what SNS
 * decides by ("FifoTopic – When this is set to true, a FIFO topic is created", Amazon SNS API Reference,
 * GetTopicAttributes / CreateTopic). Failures to ask are classified by checkFailure.ts.
 */
export async function checkTopic(
  sns: SNSClient,
  topicArn: string,
  fifo: boolean,
  endpoint: string,
  timeoutMs: number,
): Promise<DestinationCheck> {
  let attributes: Record<string, string>;
  const { GetTopicAttributesCommand } = await snsSdk();
  try {
    const response = await sns.send(new GetTopicAttributesCommand({ TopicArn: topicArn }), {
      abortSignal: AbortSignal.timeout(timeoutMs),
    });
    attributes = response.Attributes ?? {};
  } catch (error) {
    return checkFailure(error, {
      service: "SNS",
      what: `topic ${topicArn}`,
      missing: /NotFound/,
      missingHint: "check the route's topicArn, its region and account, and the endpoint",
      action: "sns:GetTopicAttributes",
      endpoint,
    });
  }
  const isFifo = attributes.FifoTopic === "true";
  if (fifo && !isFifo) {
    throw new ConfigError(
      `topic ${topicArn} is not a FIFO topic (FifoTopic is not "true") but its route's kind is sns-fifo: ` +
        "a standard topic neither orders per aggregate nor deduplicates; point the route at a FIFO topic",
    );
  }
  if (!fifo && isFifo) {
    throw new ConfigError(
      `topic ${topicArn} is a FIFO topic but its route's kind is sns (standard): SNS refuses a message without ` +
        "a MessageGroupId on a FIFO topic; set the route's kind to sns-fifo",
    );
  }
  return { verified: true };
}
