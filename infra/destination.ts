import { Duration, Names, type RemovalPolicy, Stack, Token } from "aws-cdk-lib";
import type * as events from "aws-cdk-lib/aws-events";
import * as iam from "aws-cdk-lib/aws-iam";
import type * as kms from "aws-cdk-lib/aws-kms";
import * as sqs from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import {
  checkSource,
  DEFAULT_EVENT_SOURCE,
  EVENTBRIDGE_MAX_REQUEST_BYTES,
} from "../functions/shared/destinations/eventBridge/eventBridge.ts";
import type { PlaceLimit } from "../functions/shared/destinations/limits.ts";
import { DESTINATION_SETTINGS } from "../functions/shared/destinations/setting.ts";
import { SQS_MAX_MESSAGE_BYTES } from "../functions/shared/destinations/sqs/limits.ts";
import { limitName, queueMessageBytes, viaService } from "./routes.ts";

export { SQS_MAX_MESSAGE_BYTES };

const { queueUrl, eventBusName: bus, eventSource } = DESTINATION_SETTINGS;

export interface DestinationProps {
  /** An existing FIFO queue or an EventBridge bus; default: a FIFO queue created here. */
  target?: sqs.IQueue | events.IEventBus | undefined;
  /** With a bus: the events' source (OUTBOX_EVENT_SOURCE); default the relay's. */
  eventSource?: string | undefined;
  queueEncryptionKey?: kms.IKey | undefined;
  consumerMaxReceiveCount?: number | undefined;
  consumerVisibilityTimeout?: Duration | undefined;
  /** The created queue's name (ends in .fifo); default derived from the construct's path. */
  queueName?: string | undefined;
  removalPolicy: RemovalPolicy;
}

/** Where the relay publishes: a FIFO queue (created here or given) or an EventBridge bus. */
export type Destination = QueueDestination | BusDestination;

export interface BusDestination {
  kind: "eventbridge";
  eventBus: events.IEventBus;
  /** The relay's environment for it: OUTBOX_EVENT_BUS_NAME (the bus's ARN) and OUTBOX_EVENT_SOURCE. */
  environment: Record<string, string>;
  /** The bus's fixed limit (what the relay's memory is sized for). */
  defaultMaxMessageBytes: number;
  sizeKnown: true;
  /** The bus as the write API's limit names it (destinations/limits.ts). */
  limitName: string;
}

export interface QueueDestination {
  kind: "sqs-fifo";
  queue: sqs.IQueue;
  environment: Record<string, string>;
  /** The consumers' dead-letter queue, when the queue is created here. */
  consumerDeadLetterQueue?: sqs.Queue;
  /** Whether the queue (and so its policy) is ours. */
  created: boolean;
  /**
   * RELAY_MAX_MESSAGE_BYTES when none is given: what the queue accepts. A queue of this app (created here or
   * passed in) shows it in its template; an imported one does not, and the attribute's default is assumed.
   */
  defaultMaxMessageBytes: number;
  /** False for an imported queue: its size is assumed, and the construct warns unless relay.maxMessageBytes says. */
  sizeKnown: boolean;
  limitName: string;
}

/** The queue the relay publishes to: an existing FIFO queue, or a high-throughput one with a consumer DLQ. */
export function createDestination(scope: Construct, props: DestinationProps): Destination {
  const target = props.target;
  if (target !== undefined && isEventBus(target)) {
    // Checked here, at synth, with the relay's own rule, so a bad source fails `cdk synth`, not a cold start.
    const source = props.eventSource ?? DEFAULT_EVENT_SOURCE;
    try {
      checkSource(source);
    } catch (error) {
      throw new Error(`OutboxRelay eventSource: ${(error as Error).message.replace(/^source: /, "")}`);
    }
    return {
      kind: "eventbridge",
      eventBus: target,
      // The ARN, not the name: it also names a bus in another account.
      environment: { [bus.env]: target.eventBusArn, [eventSource.env]: source },
      defaultMaxMessageBytes: EVENTBRIDGE_MAX_REQUEST_BYTES,
      sizeKnown: true,
      limitName: limitName("eventbridge", target),
    };
  }
  if (props.eventSource !== undefined) {
    throw new Error("OutboxRelay: eventSource applies only to an EventBridge bus destination");
  }
  if (target !== undefined) {
    if (!target.fifo) {
      throw new Error("OutboxRelay: the queue must be a FIFO queue (its name ends in .fifo)");
    }
    const size = queueMessageBytes(target);
    return {
      kind: "sqs-fifo",
      queue: target,
      environment: { [queueUrl.env]: target.queueUrl },
      created: false,
      defaultMaxMessageBytes: size.bytes,
      sizeKnown: size.known,
      limitName: limitName("sqs-fifo", target),
    };
  }
  const encryption =
    props.queueEncryptionKey === undefined
      ? { encryption: sqs.QueueEncryption.SQS_MANAGED }
      : { encryption: sqs.QueueEncryption.KMS, encryptionMasterKey: props.queueEncryptionKey };
  // The queue's name is fixed here, not left to CloudFormation, so the dead-letter queue's redrive allow policy
  // can name it: the queue's RedrivePolicy already refers to the DLQ, and a reference back would be a cycle.
  // 69 + "-queue.fifo" = 80 characters, SQS's limit; unique per construct path, so per stack in an account. The
  // same name every time a stack of that name is created: with the queue retained (the default), creating the
  // stack again after `cdk destroy` fails with "already exists" until the old queue is deleted. `queueName` can
  // make it unique per stack created (exampleStack.ts does, with stackCreationSuffix); the default stays as it
  // was, since a new name on an existing stack replaces the queue and strands what it holds.
  const queueName =
    props.queueName ?? `${Names.uniqueResourceName(scope, { maxLength: 69, separator: "-" })}-queue.fifo`;
  checkQueueName(queueName);
  const queueArn = Stack.of(scope).formatArn({ service: "sqs", resource: queueName });
  const dlq = new sqs.Queue(scope, "ConsumerDeadLetterQueue", {
    fifo: true,
    maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
    retentionPeriod: Duration.days(14),
    enforceSSL: true,
    removalPolicy: props.removalPolicy,
    // Only the outbox queue may move messages here: another queue pointed at this DLQ would mix its failures
    // into the outbox's and into its alarm.
    redriveAllowPolicy: {
      redrivePermission: sqs.RedrivePermission.BY_QUEUE,
      sourceQueues: [sqs.Queue.fromQueueArn(scope, "QueueReference", queueArn)],
    },
    ...encryption,
  });
  const queue = new sqs.Queue(scope, "Queue", {
    queueName,
    fifo: true,
    // The relay sets MessageDeduplicationId to the outbox row id; hashing bodies would merge distinct events
    // that happen to carry the same payload.
    contentBasedDeduplication: false,
    // High-throughput FIFO: deduplication and the 300 TPS limit apply per message group (= aggregate), so the
    // queue scales with the number of aggregates (up to 70k TPS per action in large regions).
    deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
    fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
    maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
    // The longest SQS allows: consumers that are down for a long weekend lose nothing.
    retentionPeriod: Duration.days(14),
    visibilityTimeout: props.consumerVisibilityTimeout ?? Duration.seconds(30),
    // A message that fails 5 receives moves aside and unblocks its group (FIFO DLQ semantics).
    deadLetterQueue: { queue: dlq, maxReceiveCount: props.consumerMaxReceiveCount ?? 5 },
    enforceSSL: true,
    removalPolicy: props.removalPolicy,
    ...encryption,
  });
  return {
    kind: "sqs-fifo",
    queue,
    environment: { [queueUrl.env]: queue.queueUrl },
    consumerDeadLetterQueue: dlq,
    created: true,
    defaultMaxMessageBytes: SQS_MAX_MESSAGE_BYTES,
    sizeKnown: true,
    // The name fixed above, not the queue's attribute (a token until CloudFormation resolves it).
    limitName: Token.isUnresolved(queueName) ? limitName("sqs-fifo", queue) : `sqs-fifo:${queueName}`,
  };
}

/**
 * What the relay may do on its queue: SendMessage (which authorizes SendMessageBatch) and GetQueueAttributes
 * (the cold-start check that the queue exists, is FIFO and accepts the configured message size). With a
 * customer-managed key, SQS encrypts with the caller's permissions: GenerateDataKey and Decrypt on the key, or
 * every send fails with KMS.AccessDeniedException.
 */
export function grantRelayPublish(destination: Destination, role: iam.IRole): void {
  if (destination.kind === "eventbridge") {
    // PutEvents on this bus only. A bus in another account also needs its resource policy to allow the role.
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ["events:PutEvents"],
        resources: [destination.eventBus.eventBusArn],
      }),
    );
    return;
  }
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ["sqs:SendMessage", "sqs:GetQueueAttributes"],
      resources: [destination.queue.queueArn],
    }),
  );
  // Only through SQS (kms:ViaService): the role cannot use the key directly, for anything else it protects. In
  // the role's policy, not the key's, so a key from another stack or account needs no change of its own beyond
  // trusting the account's IAM policies (the default key policy does).
  const key = destination.queue.encryptionMasterKey;
  if (key !== undefined) role.addToPrincipalPolicy(viaService(key, "sqs", destination.queue));
}

/**
 * Makes the relay the queue's only producer: a Deny on sqs:SendMessage for every principal but the relay's role
 * (aws:PrincipalArn is the role's ARN for its sessions) and the `redriveRoles`. A Deny wins over any Allow,
 * including an account administrator's, so nothing else can put a message in the consumers' stream.
 *
 * Two doors stay shut with it:
 * - The redrive: a message move task (start-message-move-task, the console's "Start DLQ redrive") sends to the
 *   destination with the caller's own permissions (SQS developer guide, "Amazon SQS API permissions":
 *   StartMessageMoveTask needs sqs:SendMessage on the destination), so the Deny stops it unless the caller is one
 *   of `redriveRoles`. Those roles are exempt and granted what a move needs, and nothing else.
 * - The consumer dead-letter queue: whatever lands there, a redrive carries into the protected stream, so nobody
 *   may send to it either. SQS moves messages there itself after maxReceiveCount; the Deny is held to callers
 *   that are not an AWS service (aws:PrincipalIsAWSService), so that move is never what it refuses.
 */
export function restrictSendToRelay(
  destination: Destination,
  role: iam.IRole,
  redriveRoles: readonly iam.IRole[] = [],
): void {
  if (destination.kind === "eventbridge") {
    throw new Error(
      "OutboxRelay: restrictSendToRelay applies to the queue the construct creates; for a bus, restrict " +
        "events:PutEvents in the bus's resource policy (docs/eventbridge.md)",
    );
  }
  if (!destination.created) {
    throw new Error(
      "OutboxRelay: restrictSendToRelay needs the queue created by the construct; for an existing queue add the " +
        "Deny statement to its own policy (docs/deploy.md)",
    );
  }
  const senders = [role, ...redriveRoles].map((r) => r.roleArn);
  destination.queue.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: "OnlyTheOutboxRelaySends",
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ["sqs:SendMessage"],
      resources: [destination.queue.queueArn],
      conditions: { ArnNotEquals: { "aws:PrincipalArn": senders.length === 1 ? senders[0] : senders } },
    }),
  );
  const dlq = destination.consumerDeadLetterQueue;
  if (dlq === undefined) return;
  dlq.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: "NobodySendsToTheDeadLetterQueue",
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ["sqs:SendMessage"],
      resources: [dlq.queueArn],
      conditions: { Bool: { "aws:PrincipalIsAWSService": "false" } },
    }),
  );
  for (const operator of redriveRoles) {
    operator.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: [
          "sqs:StartMessageMoveTask",
          "sqs:ListMessageMoveTasks",
          "sqs:CancelMessageMoveTask",
          "sqs:ReceiveMessage",
          "sqs:DeleteMessage",
          "sqs:GetQueueAttributes",
        ],
        resources: [dlq.queueArn],
      }),
    );
    operator.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ["sqs:SendMessage"], resources: [destination.queue.queueArn] }),
    );
    // With a customer key, the move decrypts from the DLQ and encrypts into the queue as the caller.
    const key = destination.queue.encryptionMasterKey;
    if (key !== undefined) operator.addToPrincipalPolicy(viaService(key, "sqs", destination.queue));
  }
}

/** SQS's rule for a FIFO queue's name: 1-80 letters, digits, hyphens or underscores, ending in `.fifo`. */
function checkQueueName(name: string): void {
  if (Token.isUnresolved(name)) return;
  if (!/^[A-Za-z0-9_-]{1,75}\.fifo$/.test(name)) {
    throw new Error(
      `OutboxRelay queueName ${JSON.stringify(name)}: a FIFO queue's name is 1-80 letters, digits, hyphens or ` +
        "underscores ending in .fifo",
    );
  }
}

function isEventBus(target: sqs.IQueue | events.IEventBus): target is events.IEventBus {
  return "eventBusArn" in target;
}

/** The default destination's entry in the write API's limit: the queue's (or relay.maxMessageBytes), the bus's. */
export function destinationLimit(destination: Destination, maxMessageBytes: number): PlaceLimit {
  return { kind: destination.kind, maxMessageBytes, name: destination.limitName };
}
