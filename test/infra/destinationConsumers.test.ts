import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Duration, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as events from "aws-cdk-lib/aws-events";
import * as targets from "aws-cdk-lib/aws-events-targets";
import * as kinesis from "aws-cdk-lib/aws-kinesis";
import * as kms from "aws-cdk-lib/aws-kms";
import * as sns from "aws-cdk-lib/aws-sns";
import * as subscriptions from "aws-cdk-lib/aws-sns-subscriptions";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { cfnLint } from "../support/cdkChecks.ts";
import { importedNetwork, newApp, type Resource, resources } from "../support/template.ts";

/**
 * Issue 40, item 11: the readers' side of SNS, Kinesis and bus routes pages, as a queue's consumers' side does
 * (ConsumersStalled, the consumer's alarms). Topics and streams are known when the construct is made; the rules on
 * a bus and a topic's subscription dead-letter queues are found in the stack at synthesis, so those defined after
 * the OutboxRelay count too.
 */
function routedStack() {
  const stack = new Stack(newApp(), "Shop");
  const { vpc, secret } = importedNetwork(stack);
  const payments = new sns.Topic(stack, "Payments", { fifo: true, topicName: "payments.fifo" });
  const audit = new kinesis.Stream(stack, "Audit", {
    encryption: kinesis.StreamEncryption.KMS,
    encryptionKey: new kms.Key(stack, "AuditKey", { enableKeyRotation: true }),
  });
  const customers = new events.EventBus(stack, "Customers");
  const other = new events.EventBus(stack, "Other");
  const relay = new OutboxRelay(stack, "Outbox", {
    database: { secret, vpc },
    migrations: false,
    alarms: { createTopic: true, queueOldestMessageAgeSeconds: 600 },
    routes: [
      { match: { aggregateType: "payment" }, destination: payments },
      { match: { aggregateType: "audit" }, destination: audit },
      { match: { aggregateType: "customer" }, destination: customers },
    ],
  });
  // After the relay: a rule on its bus, one on another bus, a subscription with a dead-letter queue.
  const crm = new sqs.Queue(stack, "Crm", { enforceSSL: true });
  new events.Rule(stack, "ToCrm", {
    eventBus: customers,
    eventPattern: { source: ["outbox-relay"] },
    targets: [new targets.SqsQueue(crm)],
  });
  new events.Rule(stack, "Elsewhere", {
    eventBus: other,
    eventPattern: { source: ["x"] },
    targets: [new targets.SqsQueue(crm)],
  });
  const ledger = new sqs.Queue(stack, "Ledger.fifo", { fifo: true, queueName: "ledger.fifo" });
  const ledgerDlq = new sqs.Queue(stack, "LedgerDlq", { fifo: true, queueName: "ledger-dlq.fifo" });
  payments.addSubscription(
    new subscriptions.SqsSubscription(ledger, { rawMessageDelivery: true, deadLetterQueue: ledgerDlq }),
  );
  const template = Template.fromStack(stack);
  return { relay, template };
}

function alarm(template: Template, id: RegExp): Resource & { Properties: Record<string, unknown> } {
  const found = resources(template, "AWS::CloudWatch::Alarm").filter(([logical]) => id.test(logical));
  expect(
    found.map(([logical]) => logical),
    String(id),
  ).toHaveLength(1);
  return (found[0] as [string, Resource & { Properties: Record<string, unknown> }])[1];
}

const refTo = (id: RegExp) => ({ Ref: expect.stringMatching(id) });

describe("alarms on the readers' side of topics, streams and buses", () => {
  const { relay, template } = routedStack();

  it("pages when SNS gives up a delivery of a routed topic (NumberOfNotificationsFailed, per 5 minutes)", () => {
    const { Properties } = alarm(template, /^OutboxPaymentsDeliveryFailuresAlarm/);
    expect(Properties).toMatchObject({
      Namespace: "AWS/SNS",
      MetricName: "NumberOfNotificationsFailed",
      Statistic: "Sum",
      Period: 300,
      Threshold: 1,
      EvaluationPeriods: 1,
      TreatMissingData: "notBreaching",
    });
    expect(Properties.Dimensions).toEqual([
      { Name: "TopicName", Value: { "Fn::GetAtt": [expect.stringMatching(/^Payments/), "TopicName"] } },
    ]);
  });

  it("pages on a routed topic's subscription dead-letter queue, defined after the relay", () => {
    const { Properties } = alarm(template, /^OutboxPayments.*DeadLettersAlarm/);
    expect(Properties).toMatchObject({
      Namespace: "AWS/SQS",
      MetricName: "ApproximateNumberOfMessagesVisible",
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
    });
    expect(Properties.Dimensions).toEqual([
      { Name: "QueueName", Value: { "Fn::GetAtt": [expect.stringMatching(/^LedgerDlq/), "QueueName"] } },
    ]);
  });

  it("pages when a stream's GetRecords readers fall behind, and when its writes are throttled", () => {
    expect(alarm(template, /^OutboxAuditIteratorAgeAlarm/).Properties).toMatchObject({
      Namespace: "AWS/Kinesis",
      MetricName: "GetRecords.IteratorAgeMilliseconds",
      Statistic: "Maximum",
      Period: 60,
      // alarms.queueOldestMessageAgeSeconds, in milliseconds.
      Threshold: 600_000,
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
      TreatMissingData: "missing",
      Dimensions: [{ Name: "StreamName", Value: refTo(/^Audit/) }],
    });
    expect(alarm(template, /^OutboxAuditWriteThrottlesAlarm/).Properties).toMatchObject({
      MetricName: "WriteProvisionedThroughputExceeded",
      Statistic: "Sum",
      EvaluationPeriods: 5,
      DatapointsToAlarm: 3,
    });
  });

  it("pages when a rule on the routed bus cannot deliver (FailedInvocations + DeadLetterInvocations), not for other buses", () => {
    const { Properties } = alarm(template, /^OutboxCustomersToCrmDeliveryFailuresAlarm/);
    const metrics = Properties.Metrics as {
      Id: string;
      Expression?: string;
      MetricStat?: { Metric: { MetricName: string; Dimensions: unknown[] } };
    }[];
    expect(metrics.find((m) => m.Expression !== undefined)?.Expression).toBe(
      "FILL(failed, 0) + FILL(refused, 0)",
    );
    const stats = metrics.flatMap((m) => (m.MetricStat === undefined ? [] : [m.MetricStat.Metric]));
    expect(stats.map((m) => m.MetricName).sort()).toEqual(["DeadLetterInvocations", "FailedInvocations"]);
    for (const stat of stats) {
      // A custom bus's rule is measured by EventBusName and RuleName.
      expect(stat.Dimensions).toEqual([
        { Name: "EventBusName", Value: refTo(/^Customers/) },
        { Name: "RuleName", Value: refTo(/^ToCrm/) },
      ]);
    }
    const all = JSON.stringify(resources(template, "AWS::CloudWatch::Alarm"));
    expect(all).not.toMatch(/Elsewhere/);
    // The construct's own schedule rules are not a consumer's.
    expect(all).not.toMatch(/OutboxCustomersOutbox/);
  });

  it("adds them to the construct's alarms and sends them to the alarm topic", () => {
    for (const key of [
      "deliveryFailuresPayments",
      "iteratorAgeAudit",
      "writeThrottlesAudit",
      "ruleDeliveryFailuresCustomersToCrm",
    ]) {
      expect(Object.keys(relay.alarms), key).toContain(key);
    }
    for (const id of [/^OutboxCustomersToCrmDeliveryFailuresAlarm/, /^OutboxAuditIteratorAgeAlarm/]) {
      expect(alarm(template, id).Properties.AlarmActions).toEqual([refTo(/^OutboxAlarmTopic/)]);
    }
  });

  it("passes cfn-lint with every kind of them", () => {
    const dir = mkdtempSync(join(tmpdir(), "outbox-readers-"));
    try {
      const file = join(dir, "template.json");
      writeFileSync(file, JSON.stringify(template.toJSON(), null, 1));
      const lint = cfnLint(file, process.env);
      expect(lint.status, `cfn-lint found problems:\n${lint.stdout}\n${lint.stderr}`).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("makes none for queue routes: their consumers have ConsumersStalled and the consumer's alarms", () => {
    const stack = new Stack(newApp(), "Queues");
    const { vpc, secret } = importedNetwork(stack);
    new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      routes: [
        {
          match: { aggregateType: "order" },
          destination: new sqs.Queue(stack, "Orders", {
            fifo: true,
            visibilityTimeout: Duration.minutes(3),
          }),
        },
      ],
    });
    const ids = resources(Template.fromStack(stack), "AWS::CloudWatch::Alarm").map(([id]) => id);
    expect(ids.filter((id) => /DeliveryFailures|IteratorAge|WriteThrottles/.test(id))).toEqual([]);
  });
});
