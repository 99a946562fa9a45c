import { Duration, RemovalPolicy } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as cloudwatchActions from "aws-cdk-lib/aws-cloudwatch-actions";
import type * as ec2 from "aws-cdk-lib/aws-ec2";
import * as iam from "aws-cdk-lib/aws-iam";
import * as lambda from "aws-cdk-lib/aws-lambda";
import * as eventSources from "aws-cdk-lib/aws-lambda-event-sources";
import * as nodejs from "aws-cdk-lib/aws-lambda-nodejs";
import * as logs from "aws-cdk-lib/aws-logs";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type * as sns from "aws-cdk-lib/aws-sns";
import type * as sqs from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import {
  acknowledgeVpcNetworkInterfaces,
  grantSecretRead,
  vpcNetworkInterfacesStatement,
} from "./lambdas.ts";

/**
 * The consuming service's side, optional: a Lambda built from the user's handler file (which exports a
 * `createInboxHandler(...)` from "aws-outbox-relay/consumer"), fed by the outbox's FIFO queue through an event
 * source mapping that reports partial batch failures, and alarms for what a consumer can silently stop doing.
 */
export interface OutboxConsumerProps {
  /** The queue to read: the outbox's FIFO queue. */
  readonly queue: sqs.IQueue;
  /** Its dead-letter queue, to alarm on; omit when another alarm already watches it (OutboxRelay's does). */
  readonly deadLetterQueue?: sqs.IQueue;
  /** The handler file (TypeScript or JavaScript), bundled with esbuild. */
  readonly entry: string;
  /** The exported handler's name. Default `handler`. */
  readonly handler?: string;
  /** The folder holding the entry's package.json and lock file. Default: esbuild's search from `entry`. */
  readonly projectRoot?: string;
  readonly depsLockFilePath?: string;
  readonly environment?: Record<string, string>;
  /**
   * Records per invocation, 1-10 (the FIFO event source's maximum). Default 10. A poison message's group-mates
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
  /** Default 30 s. Keep it at or below the queue's visibility timeout (OutboxRelay's default is 30 s). */
  readonly timeout?: Duration;
  /** Default 256 MB. */
  readonly memorySize?: number;
  /** The consumer database's secret: GetSecretValue is granted on it. */
  readonly databaseSecret?: secretsmanager.ISecret;
  /** The VPC of the consumer's database, with its subnets and the security groups it admits. */
  readonly vpc?: ec2.IVpc;
  readonly vpcSubnets?: ec2.SubnetSelection;
  readonly securityGroups?: ec2.ISecurityGroup[];
  /** ApproximateAgeOfOldestMessage above this alarms: the consumer is behind or stuck. Default 900 s. */
  readonly oldestMessageAgeSeconds?: number;
  /** ALARM and OK notifications go here. */
  readonly alarmTopic?: sns.ITopic;
  /** Default one month. */
  readonly logRetention?: logs.RetentionDays;
  /** Of the log group. Default RETAIN, like the relay's. */
  readonly removalPolicy?: RemovalPolicy;
}

export class OutboxConsumer extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly eventSource: eventSources.SqsEventSource;
  readonly alarms: Record<string, cloudwatch.Alarm>;

  constructor(scope: Construct, id: string, props: OutboxConsumerProps) {
    super(scope, id);
    const batchSize = props.batchSize ?? 10;
    const maxConcurrency = props.maxConcurrency ?? 5;
    checkRange("batchSize", batchSize, 1, 10, "an SQS FIFO event source takes at most 10 records a batch");
    checkRange("maxConcurrency", maxConcurrency, 2, 1000, "the event source's scaling limit");
    if (!props.queue.fifo)
      throw new Error("OutboxConsumer: queue must be a FIFO queue (its name ends in .fifo)");

    const logGroup = new logs.LogGroup(this, "Logs", {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
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
    }
    if (props.databaseSecret !== undefined) grantSecretRead(this, role, props.databaseSecret);

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
      timeout: props.timeout ?? Duration.seconds(30),
      memorySize: props.memorySize ?? 256,
      environment: { ...props.environment, NODE_OPTIONS: "--enable-source-maps" },
      ...(props.vpc === undefined ? {} : { vpc: props.vpc }),
      ...(props.vpcSubnets === undefined ? {} : { vpcSubnets: props.vpcSubnets }),
      ...(props.securityGroups === undefined ? {} : { securityGroups: props.securityGroups }),
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

    // ReportBatchItemFailures: without it one failed record makes Lambda redeliver the whole batch, and the
    // handler's per-group skipping would be for nothing. The grant (ReceiveMessage, DeleteMessage,
    // ChangeMessageVisibility, GetQueueAttributes on this queue, KMS decrypt if encrypted) comes with it.
    this.eventSource = new eventSources.SqsEventSource(props.queue, {
      batchSize,
      maxConcurrency,
      reportBatchItemFailures: true,
    });
    this.function.addEventSource(this.eventSource);

    this.alarms = this.#alarms(props);
    if (props.alarmTopic !== undefined) {
      const action = new cloudwatchActions.SnsAction(props.alarmTopic);
      for (const alarm of Object.values(this.alarms)) {
        alarm.addAlarmAction(action);
        alarm.addOkAction(action);
      }
    }
  }

  #alarms(props: OutboxConsumerProps): Record<string, cloudwatch.Alarm> {
    const alarms: Record<string, cloudwatch.Alarm> = {};
    // A failed record is reported, not thrown: an invocation error means the whole batch failed (the handler
    // throws InboxUnavailableError when the consumer's database is unreachable; or a bad configuration, the
    // timeout), so every message of it comes back and each such receive counts towards maxReceiveCount.
    alarms.errors = new cloudwatch.Alarm(this, "ErrorsAlarm", {
      alarmDescription:
        "Outbox consumer invocations failed as a whole in 2 of 3 minutes: nothing is applied.",
      metric: this.function.metricErrors({ period: Duration.minutes(1), statistic: "Sum" }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    // 900 s: a poison message is retried maxReceiveCount (default 5) x the visibility timeout (30 s) before it
    // moves aside, 2.5 minutes; a quarter of an hour leaves room for that and for a burst, and still catches a
    // consumer that stopped (disabled mapping, throttled to zero) within the quarter hour.
    alarms.oldestMessageAge = new cloudwatch.Alarm(this, "OldestMessageAgeAlarm", {
      alarmDescription:
        "The oldest message in the outbox queue is older than the threshold: the consumer is behind or stopped.",
      metric: props.queue.metricApproximateAgeOfOldestMessage({
        period: Duration.minutes(1),
        statistic: "Maximum",
      }),
      threshold: props.oldestMessageAgeSeconds ?? 900,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (props.deadLetterQueue !== undefined) {
      alarms.deadLetters = new cloudwatch.Alarm(this, "DeadLettersAlarm", {
        alarmDescription:
          "The consumer failed a message maxReceiveCount times and SQS moved it (and its group-mates received with " +
          "it) to the dead-letter queue. Fix the cause, then redrive in order.",
        metric: props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
          period: Duration.minutes(5),
          statistic: "Maximum",
        }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    }
    return alarms;
  }
}

function checkRange(name: string, value: number, min: number, max: number, why: string) {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(
      `OutboxConsumer: ${name} must be an integer from ${min} to ${max} (${why}), got ${value}`,
    );
  }
}
