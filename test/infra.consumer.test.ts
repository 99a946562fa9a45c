import { join } from "node:path";
import { Duration, Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { AwsSolutionsChecks } from "cdk-nag";
import { describe, expect, it } from "vitest";
import { OutboxConsumer, type OutboxConsumerProps } from "../infra/consumer.ts";
import { OutboxRelay, PROJECT_ROOT } from "../infra/outboxRelay.ts";
import { importedNetwork, newApp } from "./support/template.ts";

/** Template-level tests (bundling skipped, as in infra.test.ts); infra.synth.test.ts covers real bundling. */
const ENTRY = join(PROJECT_ROOT, "test/fixtures/consumerHandler.ts");

function stackWithQueue() {
  const stack = new Stack(newApp(), "Consumer", { env: { account: "123456789012", region: "eu-west-1" } });
  const dlq = new sqs.Queue(stack, "Dlq", { fifo: true, enforceSSL: true });
  const queue = new sqs.Queue(stack, "Queue", {
    fifo: true,
    enforceSSL: true,
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
      ]),
    );
  });

  it("alarms on failed invocations, an old oldest message and dead letters, notifying the topic", () => {
    const { construct, template } = consumer((stack) => ({
      alarmTopic: new sns.Topic(stack, "Alarms", { enforceSSL: true }),
      oldestMessageAgeSeconds: 600,
    }));
    expect(Object.keys(construct.alarms).sort()).toEqual(["deadLetters", "errors", "oldestMessageAge"]);
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
  it("creates the consumer on the relay's queue, without a second alarm on the relay's dead-letter queue", () => {
    const app = newApp();
    const stack = new Stack(app, "Outbox");
    const { vpc, secret } = importedNetwork(stack);
    const relay = new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      consumer: { entry: ENTRY, projectRoot: PROJECT_ROOT, batchSize: 1 },
    });
    const template = Template.fromStack(stack);
    const queueId = stack.getLogicalId(relay.queue?.node.defaultChild as sqs.CfnQueue);
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 1,
      EventSourceArn: { "Fn::GetAtt": [queueId, "Arn"] },
    });
    expect(relay.consumer?.alarms.deadLetters).toBeUndefined();
    expect(relay.alarms.consumerDeadLetters).toBeDefined();
  });
});
