import { join } from "node:path";
import { Duration, Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { AwsSolutionsChecks } from "cdk-nag";
import { describe, expect, it } from "vitest";
import { OutboxConsumer, type OutboxConsumerProps } from "../../infra/consumer.ts";
import { OutboxRelay, PROJECT_ROOT } from "../../infra/outboxRelay.ts";
import { importedNetwork, newApp } from "../support/template.ts";

/** Template-level tests (bundling skipped, as in infra.test.ts); infra.synth.test.ts covers real bundling. */
const ENTRY = join(PROJECT_ROOT, "test/fixtures/consumerHandler.ts");

function stackWithQueue() {
  const stack = new Stack(newApp(), "Consumer", { env: { account: "123456789012", region: "eu-west-1" } });
  const dlq = new sqs.Queue(stack, "Dlq", { fifo: true, enforceSSL: true });
  const queue = new sqs.Queue(stack, "Queue", {
    fifo: true,
    enforceSSL: true,
    visibilityTimeout: Duration.seconds(180),
    deadLetterQueue: { queue: dlq, maxReceiveCount: 5 },
  });
  return { stack, queue, dlq };
}

/** The construct on a queue with a dead-letter queue; `extra` may add props (and resources for them). */
function consumer(
  extra: Partial<OutboxConsumerProps> | ((stack: Stack) => Partial<OutboxConsumerProps>) = {},
) {
  const { stack, queue, dlq } = stackWithQueue();
  const construct = new OutboxConsumer(stack, "Billing", {
    queue,
    deadLetterQueue: dlq,
    entry: ENTRY,
    projectRoot: PROJECT_ROOT,
    depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
    ...(typeof extra === "function" ? extra(stack) : extra),
  });
  return { stack, construct, template: Template.fromStack(stack) };
}

describe("OutboxConsumer", () => {
  it("evaluates its Errors alarm over the function's timeout plus a period (Lambda sends Errors at the end)", () => {
    const errors = (template: Template) =>
      Object.values(
        template.findResources("AWS::CloudWatch::Alarm", { Properties: { MetricName: "Errors" } }),
      );
    const [short] = errors(consumer().template);
    expect(short?.Properties).toMatchObject({ Period: 60, EvaluationPeriods: 3, DatapointsToAlarm: 2 });
    // 300 s timeout: ceil(300 / 60) + 1 = 6 one-minute periods (its queue needs 6 x 300 s of visibility).
    const { template } = consumer((stack) => ({
      timeout: Duration.seconds(300),
      queue: new sqs.Queue(stack, "SlowQueue", { visibilityTimeout: Duration.seconds(1800) }),
    }));
    const [long] = errors(template);
    expect(long?.Properties).toMatchObject({ Period: 60, EvaluationPeriods: 6, DatapointsToAlarm: 2 });
  });

  it("maps the queue to the function with partial batch failures, batch size and a concurrency cap", () => {
    const { template } = consumer({ batchSize: 5, maxConcurrency: 3 });
    template.resourceCountIs("AWS::Lambda::EventSourceMapping", 1);
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 5,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      ScalingConfig: { MaximumConcurrency: 3 },
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Handler: "index.handler",
      Runtime: "nodejs24.x",
      Architectures: ["arm64"],
      Timeout: 30,
    });
  });

  it("defaults to 10 records a batch and 5 concurrent invocations", () => {
    const { template } = consumer();
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 10,
      ScalingConfig: { MaximumConcurrency: 5 },
    });
  });

  it("may only receive, delete and change visibility on its queue", () => {
    const { template } = consumer();
    const policies = Object.values(template.findResources("AWS::IAM::Policy")) as {
      Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } };
    }[];
    const actions = policies.flatMap((policy) =>
      policy.Properties.PolicyDocument.Statement.flatMap((statement) => statement.Action),
    );
    expect(new Set(actions)).toEqual(
      new Set([
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueUrl",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
      ]),
    );
  });

  it("alarms on failed invocations, an old oldest message and dead letters, notifying the topic", () => {
    const { construct, template } = consumer((stack) => ({
      alarmTopic: new sns.Topic(stack, "Alarms", { enforceSSL: true }),
      oldestMessageAgeSeconds: 600,
    }));
    expect(Object.keys(construct.alarms).sort()).toEqual([
      "deadLetters",
      "errors",
      "failedRecords",
      "oldestMessageAge",
    ]);
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateAgeOfOldestMessage",
      Threshold: 600,
      AlarmActions: [{ Ref: Match.stringLikeRegexp("^Alarms") }],
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateNumberOfMessagesVisible",
      Threshold: 0,
    });
  });

  it("alarms on the inbox's failed records, in the namespace and service its Metrics instance gets from the environment", () => {
    const { template } = consumer({ metricsNamespace: "Billing", serviceName: "billing-consumer" });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      Namespace: "Billing",
      MetricName: "InboxRecordsFailed",
      Dimensions: [{ Name: "service", Value: "billing-consumer" }],
      Statistic: "Sum",
      Period: 300,
      Threshold: 1,
      EvaluationPeriods: 3,
      DatapointsToAlarm: 2,
      TreatMissingData: "notBreaching",
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          POWERTOOLS_METRICS_NAMESPACE: "Billing",
          POWERTOOLS_SERVICE_NAME: "billing-consumer",
        }),
      },
    });
  });

  it("accepts a standard queue (an EventBridge rule's target)", () => {
    const { template } = consumer((stack) => ({
      queue: new sqs.Queue(stack, "RuleQueue", { enforceSSL: true, visibilityTimeout: Duration.minutes(3) }),
    }));
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
  });

  it("creates a standard queue with a dead-letter queue and 6x the function timeout when given none", () => {
    const stack = new Stack(newApp(), "Consumer");
    const construct = new OutboxConsumer(stack, "Billing", {
      entry: ENTRY,
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
      timeout: Duration.seconds(40),
    });
    const template = Template.fromStack(stack);
    expect(construct.queue.fifo).toBe(false);
    expect(construct.deadLetterQueue).toBeDefined();
    expect(Object.keys(construct.alarms)).toContain("deadLetters");
    template.hasResourceProperties("AWS::SQS::Queue", {
      VisibilityTimeout: 240,
      RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }),
    });
    const findings = new AwsSolutionsChecks(undefined, { verbose: true })
      .validateScope(construct)
      .violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
    expect(findings).toEqual([]);
  });

  it("refuses at synth a queue whose visibility timeout is shorter than 6x the function timeout, naming both", () => {
    expect(() =>
      consumer((stack) => ({
        queue: new sqs.Queue(stack, "Short", { visibilityTimeout: Duration.seconds(30) }),
      })),
    ).toThrow(/visibility timeout is 30 s, shorter than 6 x the function timeout of 30 s = 180 s/);
    expect(() =>
      consumer((stack) => ({
        queue: sqs.Queue.fromQueueArn(stack, "Imported", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"),
        queueVisibilityTimeout: Duration.seconds(60),
        timeout: Duration.seconds(20),
      })),
    ).toThrow(/visibility timeout is 60 s, shorter than 6 x the function timeout of 20 s = 120 s/);
    // Unknown (imported, not stated): nothing to check at synth.
    expect(() =>
      consumer((stack) => ({
        queue: sqs.Queue.fromQueueArn(stack, "Imported", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"),
      })),
    ).not.toThrow();
  });

  it("keeps the user's NODE_OPTIONS, adds source maps, and traces with X-Ray", () => {
    const { template } = consumer({ environment: { NODE_OPTIONS: "--max-old-space-size=200", TABLE: "t" } });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          NODE_OPTIONS: "--max-old-space-size=200 --enable-source-maps",
          TABLE: "t",
        }),
      },
      TracingConfig: { Mode: "Active" },
    });
  });

  it("refuses a batch size a FIFO event source cannot take, naming the setting and the limit", () => {
    expect(() => consumer({ batchSize: 11 })).toThrow(/batchSize must be an integer from 1 to 10 .*got 11/);
    expect(() => consumer({ maxConcurrency: 1 })).toThrow(/maxConcurrency must be an integer from 2 to 1000/);
  });

  it("passes cdk-nag's AWS Solutions checks in a VPC with a database secret", () => {
    const { stack, queue } = stackWithQueue();
    const { vpc, secret } = importedNetwork(stack);
    const construct = new OutboxConsumer(stack, "Billing", {
      queue,
      entry: ENTRY,
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
      vpc,
      databaseSecret: secret,
      timeout: Duration.seconds(20),
    });
    const findings = new AwsSolutionsChecks(undefined, { verbose: true })
      .validateScope(construct)
      .violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
    expect(findings).toEqual([]);
    Template.fromStack(stack).hasResourceProperties("AWS::IAM::Policy", {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Action: "secretsmanager:GetSecretValue", Resource: secret.secretArn }),
        ]),
      },
    });
  });
});

describe("OutboxRelay's consumer prop", () => {
  /** The relay with a consumer on its created queue, in a stack of its own. */
  function relayWithConsumer(props: Partial<ConstructorParameters<typeof OutboxRelay>[2]>) {
    const stack = new Stack(newApp(), "Outbox");
    const { vpc, secret } = importedNetwork(stack);
    const relay = new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      ...props,
    });
    return { stack, relay, template: Template.fromStack(stack) };
  }

  it("creates the consumer on the relay's queue, without a second alarm on the relay's dead-letter queue", () => {
    const { stack, relay, template } = relayWithConsumer({
      consumer: { entry: ENTRY, projectRoot: PROJECT_ROOT, batchSize: 1 },
    });
    const queueId = stack.getLogicalId(relay.queue?.node.defaultChild as sqs.CfnQueue);
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 1,
      EventSourceArn: { "Fn::GetAtt": [queueId, "Arn"] },
    });
    // The relay's queue gets the 6x of the consumer's default 30 s timeout.
    template.hasResourceProperties("AWS::SQS::Queue", { FifoQueue: true, VisibilityTimeout: 180 });
    expect(relay.consumer?.alarms.deadLetters).toBeUndefined();
    expect(relay.alarms.consumerDeadLetters).toBeDefined();
  });

  it("pages once for a stalled queue: the consumer's oldest-message alarm, at the relay's threshold", () => {
    const { stack, relay, template } = relayWithConsumer({
      alarms: { queueOldestMessageAgeSeconds: 600 },
      consumer: { entry: ENTRY, projectRoot: PROJECT_ROOT },
    });
    const queueName = {
      "Fn::GetAtt": [stack.getLogicalId(relay.queue?.node.defaultChild as sqs.CfnQueue), "QueueName"],
    };
    const ageAlarms = template.findResources("AWS::CloudWatch::Alarm", {
      Properties: {
        MetricName: "ApproximateAgeOfOldestMessage",
        Dimensions: [{ Name: "QueueName", Value: queueName }],
      },
    });
    expect(Object.keys(ageAlarms).map((id) => id.replace(/[0-9A-F]{8}$/, ""))).toEqual([
      "OutboxConsumerOldestMessageAgeAlarm",
    ]);
    expect(Object.values(ageAlarms)[0]?.Properties.Threshold).toBe(600);
    expect(relay.alarms.consumersStalled).toBeUndefined();
  });
});

/** Issue 40, item 10: the README's path, `consumer` on a queue the app gives, must page on its dead letters. */
describe("OutboxRelay consumer on a given queue", () => {
  function given(deadLetterQueue: "own" | "named") {
    const stack = new Stack(newApp(), "Given");
    const { vpc, secret } = importedNetwork(stack);
    const dlq = new sqs.Queue(stack, "OrdersDlq", { fifo: true, enforceSSL: true });
    const queue = new sqs.Queue(stack, "Orders", {
      fifo: true,
      enforceSSL: true,
      visibilityTimeout: Duration.minutes(10),
      ...(deadLetterQueue === "own" ? { deadLetterQueue: { queue: dlq, maxReceiveCount: 5 } } : {}),
    });
    new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      queue,
      consumer: {
        entry: "test/fixtures/consumerHandler.ts",
        ...(deadLetterQueue === "named" ? { deadLetterQueue: dlq } : {}),
      },
    });
    return {
      template: Template.fromStack(stack),
      dlqId: stack.getLogicalId(dlq.node.defaultChild as sqs.CfnQueue),
    };
  }

  it("alarms on the queue's own dead-letter queue, or the one named", () => {
    for (const variant of ["own", "named"] as const) {
      const { template, dlqId } = given(variant);
      template.hasResourceProperties("AWS::CloudWatch::Alarm", {
        MetricName: "ApproximateNumberOfMessagesVisible",
        Dimensions: [{ Name: "QueueName", Value: { "Fn::GetAtt": [dlqId, "QueueName"] } }],
        Threshold: 0,
      });
    }
  });
});
