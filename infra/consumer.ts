import { Duration, RemovalPolicy, Token, Validations } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as iam from "aws-cdk-lib/aws-iam";
import * as lambda from "aws-cdk-lib/aws-lambda";
import * as eventSources from "aws-cdk-lib/aws-lambda-event-sources";
import * as nodejs from "aws-cdk-lib/aws-lambda-nodejs";
import * as logs from "aws-cdk-lib/aws-logs";
import type * as s3 from "aws-cdk-lib/aws-s3";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { DATABASE_SETTINGS } from "../functions/shared/db/settings.ts";
import { INBOX_METRIC } from "../functions/shared/observe/metricNames.ts";
import { METRICS_SETTINGS } from "../functions/shared/observe/settings.ts";
import { consumerAlarmTable, createAlarmsFrom } from "./alarms.ts";
import { notifyTopic } from "./alarmTopic.ts";
import { environmentOf } from "./environment.ts";
import {
  acknowledgeVpcNetworkInterfaces,
  grantSecretRead,
  vpcNetworkInterfacesStatement,
} from "./lambdas.ts";
import { defaultServicePrefix } from "./naming.ts";
import { grantPayloadRead } from "./payloadBucket.ts";

/**
 * AWS: "set the source queue's visibility timeout to at least six times the timeout that you configure on your
 * function", so that Lambda's retries of a throttled batch fit before the message becomes visible again
 * (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
 */
export const VISIBILITY_TIMEOUT_FACTOR = 6;
export const DEFAULT_CONSUMER_TIMEOUT = Duration.seconds(30);

/** The visibility timeout a queue needs for a consumer with this function timeout (default 30 s: 180 s). */
export function consumerVisibilityTimeout(functionTimeout: Duration = DEFAULT_CONSUMER_TIMEOUT): Duration {
  return Duration.seconds(functionTimeout.toSeconds() * VISIBILITY_TIMEOUT_FACTOR);
}

/**
 * The consuming service's side, optional: a Lambda built from the user's handler file (which exports a
 * `createInboxHandler(...)` from "aws-outbox-relay/consumer"), fed by a queue through an event source mapping
 * that reports partial batch failures, and alarms for what a consumer can silently stop doing. The queue is the
 * outbox's FIFO queue, or a standard queue an EventBridge rule delivers the relay's events to (then each record
 * is its own group: the bus has no order to keep, `staleEvents: "skip"` drops the late ones). Without a queue,
 * the construct creates a standard one with a dead-letter queue, for a rule to target.
 */
export interface OutboxConsumerProps {
  /**
   * The queue to read: the outbox's FIFO queue or a rule's standard queue. Default: a standard queue created
   * here (`this.queue`), visibility timeout 6x the function timeout, with a dead-letter queue.
   */
  readonly queue?: sqs.IQueue;
  /**
   * The visibility timeout of an imported queue, when the construct cannot read it (a queue of this app is
   * read from its template). With it, a timeout shorter than 6x the function timeout is refused at synth.
   */
  readonly queueVisibilityTimeout?: Duration;
  /** Its dead-letter queue, to alarm on; omit when another alarm already watches it (OutboxRelay's does). */
  readonly deadLetterQueue?: sqs.IQueue;
  /** Receives before a message of the created queue moves to its dead-letter queue. Default 5. */
  readonly maxReceiveCount?: number;
  /** The handler file (TypeScript or JavaScript), bundled with esbuild. */
  readonly entry: string;
  /** The exported handler's name. Default `handler`. */
  readonly handler?: string;
  /** The folder holding the entry's package.json and lock file. Default: esbuild's search from `entry`. */
  readonly projectRoot?: string;
  readonly depsLockFilePath?: string;
  readonly environment?: Record<string, string>;
  /**
   * Namespace and service of the EMF metrics: set as POWERTOOLS_METRICS_NAMESPACE and POWERTOOLS_SERVICE_NAME
   * (a `new Metrics()` passed as createInboxHandler's `metrics` picks them up), and watched by the
   * failed-records alarm. Default "OutboxConsumer" and the stack's name with the construct's path in it
   * ("BillingStack-Consumer"): unique per stack, so consumers in two stacks of one account never add up each
   * other's failures in one alarm.
   */
  readonly metricsNamespace?: string;
  readonly serviceName?: string;
  /**
   * Records per invocation, 1-10 (the FIFO event source's maximum; kept for standard queues too: one batch
   * runs at most 10 groups side by side). Default 10. A poison message's group-mates
   * received in the same batches reach the dead-letter queue with it (README, "Consuming events"); 1 avoids it
   * at the cost of an invocation per message.
   */
  readonly batchSize?: number;
  /**
   * Concurrent invocations the event source may run for this queue, 2-1000. Default 5: each invocation holds up
   * to `groupConcurrency` (default 4) database sessions, so 5 stays near 20 sessions at most. A FIFO queue never
   * runs two invocations on one message group.
   */
  readonly maxConcurrency?: number;
  /** Default 30 s. The queue's visibility timeout must be at least 6x this (checked when known). */
  readonly timeout?: Duration;
  /** Default 256 MB. */
  readonly memorySize?: number;
  /**
   * The consumer database's secret: GetSecretValue is granted on it (and kms:Decrypt through Secrets Manager for
   * a customer key), and the function gets its ARN as DATABASE_SECRET_ARN, which `databaseSourceFromEnv` reads.
   */
  readonly databaseSecret?: secretsmanager.ISecret;
  /** The database's name (DATABASE_NAME); default the secret's `dbname`, else `postgres`. */
  readonly databaseName?: string;
  /** The VPC of the consumer's database, with its subnets and the security groups it admits. */
  readonly vpc?: ec2.IVpc;
  readonly vpcSubnets?: ec2.SubnetSelection;
  /**
   * The function's security groups; default one created here (with `vpc`), open outbound. Either way they are
   * `this.connections`: `consumer.connections.allowToDefaultPort(cluster)`, or the props below.
   */
  readonly securityGroups?: ec2.ISecurityGroup[];
  /** The consumer's database (a cluster, an instance, a proxy, `new ec2.Connections(...)`): its port is opened to the function. */
  readonly database?: ec2.IConnectable;
  /** Interface endpoints the function reaches AWS through (Secrets Manager, ...): each is opened to it on 443. */
  readonly vpcEndpoints?: ec2.IConnectable[];
  /**
   * The relay's payload bucket (OutboxRelay `largePayloads`): s3:GetObject under its prefix, so the inbox can
   * resolve pointers (docs/large-payloads.md). Set by OutboxRelay for the consumer it creates.
   */
  readonly payloadBucket?: { bucket: s3.IBucket; prefix: string };
  /** ApproximateAgeOfOldestMessage above this alarms: the consumer is behind or stuck. Default 900 s. */
  readonly oldestMessageAgeSeconds?: number;
  /** ALARM and OK notifications go here. */
  readonly alarmTopic?: sns.ITopic;
  /** Default one month. */
  readonly logRetention?: logs.RetentionDays;
  /** Of the log group. Default RETAIN_ON_UPDATE_OR_DELETE (RetainExceptOnCreate), like the relay's. */
  readonly removalPolicy?: RemovalPolicy;
}

export class OutboxConsumer extends Construct implements ec2.IConnectable {
  readonly function: nodejs.NodejsFunction;
  /** The function's security groups (none outside a VPC): open the database or endpoints to it with these. */
  readonly connections: ec2.Connections;
  readonly eventSource: eventSources.SqsEventSource;
  readonly alarms: Record<string, cloudwatch.Alarm>;
  /** The queue read: the one passed in, or the one created. */
  readonly queue: sqs.IQueue;
  /** The created queue's dead-letter queue (undefined with a queue passed in). */
  readonly deadLetterQueue?: sqs.IQueue;

  constructor(scope: Construct, id: string, props: OutboxConsumerProps) {
    super(scope, id);
    const batchSize = props.batchSize ?? 10;
    const maxConcurrency = props.maxConcurrency ?? 5;
    const timeout = props.timeout ?? DEFAULT_CONSUMER_TIMEOUT;
    checkRange("batchSize", batchSize, 1, 10, "an SQS FIFO event source takes at most 10 records a batch");
    checkRange("maxConcurrency", maxConcurrency, 2, 1000, "the event source's scaling limit");
    checkRange("maxReceiveCount", props.maxReceiveCount ?? 5, 1, 1000, "SQS's redrive policy limit");
    const metricsNamespace = props.metricsNamespace ?? "OutboxConsumer";
    const serviceName = props.serviceName ?? defaultServicePrefix(this);
    if (props.vpc === undefined && (props.database !== undefined || props.vpcEndpoints !== undefined)) {
      throw new Error(
        "OutboxConsumer: database and vpcEndpoints need vpc: the function reaches them from inside it",
      );
    }
    const securityGroups =
      props.vpc === undefined
        ? []
        : props.securityGroups !== undefined && props.securityGroups.length > 0
          ? props.securityGroups
          : [
              new ec2.SecurityGroup(this, "SecurityGroup", {
                vpc: props.vpc,
                description: "Outbox consumer Lambda",
                allowAllOutbound: true,
              }),
            ];
    this.connections = new ec2.Connections({ securityGroups });

    if (props.queue === undefined) {
      const deadLetterQueue = new sqs.Queue(this, "DeadLetterQueue", {
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        retentionPeriod: Duration.days(14),
      });
      this.deadLetterQueue = deadLetterQueue;
      this.queue = new sqs.Queue(this, "Queue", {
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        retentionPeriod: Duration.days(14),
        visibilityTimeout: consumerVisibilityTimeout(timeout),
        deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: props.maxReceiveCount ?? 5 },
      });
    } else {
      this.queue = props.queue;
      if (props.deadLetterQueue !== undefined) this.deadLetterQueue = props.deadLetterQueue;
      const known = props.queueVisibilityTimeout?.toSeconds() ?? visibilityTimeoutOf(props.queue);
      const needed = consumerVisibilityTimeout(timeout).toSeconds();
      if (known !== undefined && known < needed) {
        throw new Error(
          `OutboxConsumer: the queue's visibility timeout is ${known} s, shorter than ${VISIBILITY_TIMEOUT_FACTOR} x ` +
            `the function timeout of ${timeout.toSeconds()} s = ${needed} s (AWS's advice for Lambda event sources): ` +
            "raise the queue's visibilityTimeout or lower timeout",
        );
      }
    }

    const logGroup = new logs.LogGroup(this, "Logs", {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
    });
    const role = new iam.Role(this, "Role", {
      assumedBy: new iam.ServicePrincipal("lambda.amazonaws.com"),
      description: "Outbox consumer Lambda",
      inlinePolicies: {
        logs: new iam.PolicyDocument({
          statements: [
            new iam.PolicyStatement({
              actions: ["logs:CreateLogStream", "logs:PutLogEvents"],
              resources: [logGroup.logGroupArn],
            }),
          ],
        }),
      },
    });
    if (props.vpc !== undefined) {
      role.addToPrincipalPolicy(vpcNetworkInterfacesStatement());
      acknowledgeVpcNetworkInterfaces(role);
    } else {
      // One acknowledgement per id: with a VPC the one above covers the role's "*" statements.
      Validations.of(role).acknowledge({
        id: "AwsSolutions-IAM5[Resource::*]",
        reason:
          "Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level " +
          "permissions (the statement CDK adds with Tracing.ACTIVE, as in AWSXRayDaemonWriteAccess).",
      });
    }
    if (props.databaseSecret !== undefined) grantSecretRead(this, role, props.databaseSecret);
    if (props.payloadBucket !== undefined) grantPayloadRead(props.payloadBucket, role);

    // The user's NODE_OPTIONS are kept, source maps added: stack traces in the log point at the handler's code.
    const userNodeOptions = props.environment?.NODE_OPTIONS;
    const nodeOptions =
      userNodeOptions === undefined || userNodeOptions.trim() === ""
        ? "--enable-source-maps"
        : userNodeOptions.includes("--enable-source-maps")
          ? userNodeOptions
          : `${userNodeOptions} --enable-source-maps`;

    this.function = new nodejs.NodejsFunction(this, "Function", {
      entry: props.entry,
      handler: props.handler ?? "handler",
      ...(props.projectRoot === undefined ? {} : { projectRoot: props.projectRoot }),
      ...(props.depsLockFilePath === undefined ? {} : { depsLockFilePath: props.depsLockFilePath }),
      description: "Outbox consumer: applies the outbox's events once each (inbox table), per group in order",
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      role,
      logGroup,
      timeout,
      memorySize: props.memorySize ?? 256,
      // Active tracing: the relay's SQS messages carry the producer's AWSTraceHeader (migration 0013, docs/tracing.md),
      // which X-Ray links to this function's trace; the inbox's OpenTelemetry span continues it (InboxEvent.trace).
      // The role gets xray:PutTraceSegments/PutTelemetryRecords with it.
      tracing: lambda.Tracing.ACTIVE,
      environment: {
        [METRICS_SETTINGS.namespace.env]: metricsNamespace,
        [METRICS_SETTINGS.serviceName.env]: serviceName,
        // What databaseSourceFromEnv reads: the secret's ARN (never its value) and the database's name.
        ...(props.databaseSecret === undefined
          ? {}
          : { [DATABASE_SETTINGS.secretArn.env]: props.databaseSecret.secretArn }),
        ...environmentOf("OutboxConsumer", [["databaseName", DATABASE_SETTINGS.name, props.databaseName]]),
        ...props.environment,
        NODE_OPTIONS: nodeOptions,
      },
      ...(props.vpc === undefined ? {} : { vpc: props.vpc }),
      ...(props.vpcSubnets === undefined ? {} : { vpcSubnets: props.vpcSubnets }),
      ...(securityGroups.length === 0 ? {} : { securityGroups }),
      bundling: {
        forceDockerBundling: false,
        format: nodejs.OutputFormat.ESM,
        target: "node24",
        mainFields: ["module", "main"],
        minify: true,
        sourceMap: true,
        sourcesContent: false,
        // ESM output for CommonJS dependencies (pg): give them a `require`.
        banner:
          "import { createRequire as __outboxCreateRequire } from 'node:module'; " +
          "const require = __outboxCreateRequire(import.meta.url);",
      },
    });

    props.database?.connections.allowDefaultPortFrom(this, "Outbox consumer to its database");
    for (const endpoint of props.vpcEndpoints ?? []) {
      endpoint.connections.allowDefaultPortFrom(this, "Outbox consumer to the AWS API endpoint");
    }

    // ReportBatchItemFailures: without it one failed record makes Lambda redeliver the whole batch, and the
    // handler's per-group skipping would be for nothing. The grant (ReceiveMessage, DeleteMessage,
    // ChangeMessageVisibility, GetQueueAttributes on this queue, KMS decrypt if encrypted) comes with it.
    this.eventSource = new eventSources.SqsEventSource(this.queue, {
      batchSize,
      maxConcurrency,
      reportBatchItemFailures: true,
    });
    this.function.addEventSource(this.eventSource);

    // Every alarm is a row of infra/alarms.ts; the failed-records one reads the inbox's EMF count.
    this.alarms = createAlarmsFrom(
      this,
      consumerAlarmTable({
        function: this.function,
        timeout,
        queue: this.queue,
        deadLetterQueue: this.deadLetterQueue,
        failedRecords: new cloudwatch.Metric({
          namespace: metricsNamespace,
          metricName: INBOX_METRIC.failed,
          dimensionsMap: { service: serviceName },
          statistic: "Sum",
          period: Duration.minutes(5),
        }),
        oldestMessageAgeSeconds: props.oldestMessageAgeSeconds ?? 900,
      }),
    );
    notifyTopic(props.alarmTopic, this.alarms);
  }
}

/** The visibility timeout of a queue defined in this app (SQS's default 30 s when unset), else undefined. */
function visibilityTimeoutOf(queue: sqs.IQueue): number | undefined {
  const resource = queue.node.defaultChild;
  if (!(resource instanceof sqs.CfnQueue)) return undefined;
  const value = resource.visibilityTimeout;
  if (value === undefined) return 30;
  return Token.isUnresolved(value) ? undefined : value;
}

function checkRange(name: string, value: number, min: number, max: number, why: string) {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(
      `OutboxConsumer: ${name} must be an integer from ${min} to ${max} (${why}), got ${value}`,
    );
  }
}
