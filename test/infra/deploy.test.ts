import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as events from "aws-cdk-lib/aws-events";
import * as iam from "aws-cdk-lib/aws-iam";
import * as kms from "aws-cdk-lib/aws-kms";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { describe, expect, it } from "vitest";
import { examplePropsFromContext, OutboxExampleStack } from "../../infra/exampleStack.ts";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { relayTiming } from "../../infra/relayTiming.ts";
import {
  asArray,
  identityStatements,
  importedNetwork,
  nagFindings,
  newApp,
  outboxStack,
  type Resource,
  resources,
} from "../support/template.ts";

/**
 * What the first real deploy needs and synth alone does not prove (issue 22): alarms that reach the topic, an
 * account with the default concurrency quota, a stack deployed again after `cdk destroy`, dead letters that page
 * each time, the paths a bus destination needs behind endpoints.
 */
function exampleApp(context: Record<string, unknown> = {}, stackName = "Example") {
  const app = newApp(context);
  const stack = new OutboxExampleStack(app, stackName, examplePropsFromContext(app.node));
  return { app, stack, template: Template.fromStack(stack) };
}

function only(template: Template, type: string, prefix: string): [string, Resource] {
  const found = resources(template, type).filter(([id]) => id.startsWith(prefix));
  if (found.length !== 1) throw new Error(`expected one ${type} named ${prefix}*, found ${found.length}`);
  return found[0] as [string, Resource];
}

function propsOf(resource: Resource): Record<string, unknown> {
  return resource.Properties ?? {};
}

function statementsOf(resource: Resource): Record<string, unknown>[] {
  return (propsOf(resource).PolicyDocument as { Statement: Record<string, unknown>[] }).Statement;
}

describe("the alarm topic the construct creates", () => {
  const { template } = exampleApp();
  const [topicId] = only(template, "AWS::SNS::Topic", "OutboxAlarmTopic");
  const [, policy] = only(template, "AWS::SNS::TopicPolicy", "OutboxAlarmTopicPolicy");
  const statements = statementsOf(policy);

  it("lets CloudWatch alarms of this account publish to it, and nothing else", () => {
    const allows = statements.filter((s) => s.Effect === "Allow");
    expect(allows).toEqual([
      {
        Sid: "AllowCloudWatchAlarmsToPublish",
        Effect: "Allow",
        Principal: { Service: "cloudwatch.amazonaws.com" },
        Action: "sns:Publish",
        Resource: { Ref: topicId },
        Condition: {
          StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } },
          ArnLike: {
            "aws:SourceArn": {
              "Fn::Join": [
                "",
                [
                  "arn:",
                  { Ref: "AWS::Partition" },
                  ":cloudwatch:",
                  { Ref: "AWS::Region" },
                  ":",
                  { Ref: "AWS::AccountId" },
                  ":alarm:*",
                ],
              ],
            },
          },
        },
      },
    ]);
  });

  it("keeps the TLS-only Deny and the key grant CloudWatch needs to encrypt", () => {
    expect(statements).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          Effect: "Deny",
          Action: "sns:Publish",
          Condition: { Bool: { "aws:SecureTransport": "false" } },
        }),
      ]),
    );
    const [, key] = only(template, "AWS::KMS::Key", "OutboxAlarmTopicKey");
    const keyStatements = (propsOf(key).KeyPolicy as { Statement: Record<string, unknown>[] }).Statement;
    expect(keyStatements).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          Principal: { Service: "cloudwatch.amazonaws.com" },
          Action: ["kms:Decrypt", "kms:GenerateDataKey*"],
        }),
      ]),
    );
  });
});

describe("reserved concurrency", () => {
  const fn = (template: Template, prefix: string) =>
    only(template, "AWS::Lambda::Function", prefix)[1].Properties as Record<string, unknown>;

  it("reserves nothing by default, so an account with the default quota of 10 can deploy the example", () => {
    const { template } = exampleApp();
    expect(fn(template, "OutboxRelayFunction").ReservedConcurrentExecutions).toBeUndefined();
    expect(fn(template, "OutboxPurgeFunction").ReservedConcurrentExecutions).toBeUndefined();
  });

  it("reserves what the timing needs when asked, in the construct and through the example's context key", () => {
    const { template } = exampleApp({ reserveConcurrency: "true" });
    expect(fn(template, "OutboxRelayFunction").ReservedConcurrentExecutions).toBe(4);
    expect(fn(template, "OutboxPurgeFunction").ReservedConcurrentExecutions).toBe(2);
    const five = outboxStack(() => ({ relays: 5, relay: { reservedConcurrency: true } })).template;
    expect(fn(five, "OutboxRelayFunction").ReservedConcurrentExecutions).toBe(20);
    const more = outboxStack(() => ({ relay: { reservedConcurrency: 6 } })).template;
    expect(fn(more, "OutboxRelayFunction").ReservedConcurrentExecutions).toBe(6);
  });

  it("refuses a reservation below what the schedule's overlap needs, naming both numbers", () => {
    expect(() => outboxStack(() => ({ relay: { reservedConcurrency: 3 } }))).toThrow(
      /relay.reservedConcurrency 3 is below the 4 concurrent invocations the schedule can start/,
    );
    expect(() => outboxStack(() => ({ relays: 2, relay: { reservedConcurrency: 7 } }))).toThrow(
      /relay.reservedConcurrency 7 is below the 8 /,
    );
  });

  it("has a reserveConcurrency key in the example's cdk.json context, off", async () => {
    const { readFileSync } = await import("node:fs");
    const cdk = JSON.parse(readFileSync(new URL("../../cdk.json", import.meta.url), "utf8"));
    expect(cdk.context.reserveConcurrency).toBe(false);
  });
});

describe("the example deployed again after cdk destroy", () => {
  const { template } = exampleApp();

  it("retains nothing under a fixed name: a retained resource must have a name CloudFormation generates", () => {
    const named = {
      "AWS::Logs::LogGroup": "LogGroupName",
      "AWS::SQS::Queue": "QueueName",
      "AWS::SNS::Topic": "TopicName",
      "AWS::KMS::Key": undefined,
    } as Record<string, string | undefined>;
    const collisions: string[] = [];
    for (const [id, resource] of Object.entries(template.toJSON().Resources as Record<string, Resource>)) {
      const policy = (resource as { DeletionPolicy?: string }).DeletionPolicy;
      const retained = policy === "Retain" || policy === "RetainExceptOnCreate";
      const nameProperty = named[resource.Type];
      if (!retained || nameProperty === undefined) continue;
      const name = resource.Properties?.[nameProperty];
      // A name that contains the stack's id is new for every stack created: no collision with a retained one.
      if (name !== undefined && !JSON.stringify(name).includes("AWS::StackId")) collisions.push(id);
    }
    expect(collisions).toEqual([]);
  });

  it("keeps the relay's queue name stable for the redrive allow policy, unique per stack created", () => {
    const [queueId, queue] = only(template, "AWS::SQS::Queue", "OutboxQueue");
    expect(JSON.stringify(queue.Properties?.QueueName)).toContain("AWS::StackId");
    const [, dlq] = only(template, "AWS::SQS::Queue", "OutboxConsumerDeadLetterQueue");
    // The allow policy names the queue by an ARN built from the same name, not by a reference (a cycle).
    const allowed = JSON.stringify(dlq.Properties?.RedriveAllowPolicy);
    expect(allowed).toContain("AWS::StackId");
    expect(allowed).not.toContain(queueId);
    // A name SQS would refuse at deploy is refused at synth, naming the prop.
    expect(() => outboxStack(() => ({ queueName: "orders" }))).toThrow(
      /queueName "orders": a FIFO queue's name is 1-80 letters, digits, hyphens or underscores ending in .fifo/,
    );
    expect(
      only(outboxStack(() => ({ queueName: "orders.fifo" })).template, "AWS::SQS::Queue", "OutboxQueue")[1]
        .Properties?.QueueName,
    ).toBe("orders.fifo");
  });
});

describe("dead letters page each time one is added", () => {
  const { template } = exampleApp();
  const alarm = (prefix: string) => only(template, "AWS::CloudWatch::Alarm", prefix)[1].Properties ?? {};

  it("alarms on any event the relay dead-letters in a minute (its EventsDeadLettered counter)", () => {
    expect(alarm("OutboxNewDeadLettersAlarm")).toMatchObject({
      Namespace: "OutboxRelay",
      MetricName: "EventsDeadLettered",
      Dimensions: [{ Name: "service", Value: "Example-Outbox-relay" }],
      Statistic: "Sum",
      Period: 60,
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      EvaluationPeriods: 1,
      TreatMissingData: "notBreaching",
    });
  });

  it("alarms when the consumer dead-letter queue grows (SQS's NumberOfMessagesSent does not count redrive moves)", () => {
    const props = alarm("OutboxNewConsumerDeadLettersAlarm");
    expect(props).toMatchObject({
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      EvaluationPeriods: 1,
      TreatMissingData: "notBreaching",
    });
    const metrics = props.Metrics as Record<string, unknown>[];
    expect(metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Expression: "DIFF(FILL(visible, 0))", ReturnData: true }),
        expect.objectContaining({
          Id: "visible",
          MetricStat: expect.objectContaining({
            Metric: expect.objectContaining({
              Namespace: "AWS/SQS",
              MetricName: "ApproximateNumberOfMessagesVisible",
            }),
            Period: 60,
            Stat: "Maximum",
          }),
        }),
      ]),
    );
  });
});

describe("restrictSendToRelay", () => {
  const policies = (template: Template) =>
    resources(template, "AWS::SQS::QueuePolicy").map(([, policy]) => ({
      queue: JSON.stringify((propsOf(policy).Queues as unknown[])[0]),
      statements: statementsOf(policy),
    }));

  it("closes the consumer dead-letter queue to every sender (SQS moves messages there itself)", () => {
    const { template } = outboxStack(() => ({ restrictSendToRelay: true }));
    const [dlqId] = only(template, "AWS::SQS::Queue", "OutboxConsumerDeadLetterQueue");
    const dlq = policies(template).find((p) => p.queue.includes(dlqId));
    expect(dlq?.statements).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          Sid: "NobodySendsToTheDeadLetterQueue",
          Effect: "Deny",
          Principal: { AWS: "*" },
          Action: "sqs:SendMessage",
        }),
      ]),
    );
  });

  it("lets the given redrive roles move dead letters back (start-message-move-task sends as the caller)", () => {
    const { stack, template } = outboxStack((stack) => ({
      restrictSendToRelay: true,
      redriveRoles: [
        new iam.Role(stack, "Operator", { assumedBy: new iam.AccountRootPrincipal() }) as iam.IRole,
      ],
    }));
    const [queueId] = only(template, "AWS::SQS::Queue", "OutboxQueue");
    const [dlqId] = only(template, "AWS::SQS::Queue", "OutboxConsumerDeadLetterQueue");
    const relayRole = { "Fn::GetAtt": [only(template, "AWS::IAM::Role", "OutboxRelayRole")[0], "Arn"] };
    const operator = { "Fn::GetAtt": [only(template, "AWS::IAM::Role", "Operator")[0], "Arn"] };
    const queue = policies(template).find((p) => p.queue === JSON.stringify({ Ref: queueId }));
    expect(queue?.statements).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          Sid: "OnlyTheOutboxRelaySends",
          Effect: "Deny",
          Condition: { ArnNotEquals: { "aws:PrincipalArn": [relayRole, operator] } },
        }),
      ]),
    );
    const granted = identityStatements(template)
      .filter(({ source }) => source.startsWith("OperatorDefaultPolicy"))
      .map(({ statement }) => ({ Action: statement.Action, Resource: statement.Resource }));
    expect(granted).toEqual(
      expect.arrayContaining([
        {
          Action: [
            "sqs:CancelMessageMoveTask",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:ListMessageMoveTasks",
            "sqs:ReceiveMessage",
            "sqs:StartMessageMoveTask",
          ],
          Resource: { "Fn::GetAtt": [dlqId, "Arn"] },
        },
        { Action: "sqs:SendMessage", Resource: { "Fn::GetAtt": [queueId, "Arn"] } },
      ]),
    );
    expect(nagFindings(stack).filter((finding) => !finding.includes("/Operator/"))).toEqual([]);
  });

  it("refuses redrive roles without restrictSendToRelay (they would have nothing to be exempt from)", () => {
    expect(() =>
      outboxStack((stack) => ({
        redriveRoles: [new iam.Role(stack, "Operator", { assumedBy: new iam.AccountRootPrincipal() })],
      })),
    ).toThrow(/redriveRoles applies with restrictSendToRelay/);
  });
});

/** The construct publishing to a bus, in an imported VPC; `database` adds endpoint props. */
function busStack(database: (stack: Stack, vpc: ec2.IVpc) => Record<string, unknown>): Template {
  const stack = new Stack(newApp(), "Bus");
  const { vpc, secret } = importedNetwork(stack);
  new OutboxRelay(stack, "Outbox", {
    database: { secret, vpc, ...database(stack, vpc) },
    destination: events.EventBus.fromEventBusArn(
      stack,
      "Bus",
      "arn:aws:events:eu-west-1:123456789012:event-bus/o",
    ),
    migrations: false,
  });
  return Template.fromStack(stack);
}

describe("smaller deploy-time findings", () => {
  it("gives a bus destination behind VPC endpoints an EventBridge endpoint and HTTPS egress to it", () => {
    const template = busStack((stack, vpc) => ({
      vpcEndpoints: [
        new ec2.InterfaceVpcEndpoint(stack, "SqsEndpoint", {
          vpc,
          service: ec2.InterfaceVpcEndpointAwsService.SQS,
          open: false,
        }),
      ],
      // An imported VPC: created only when asked (endpoints.test.ts).
      createEndpoints: "functionsOnly",
    }));
    const [endpointId, endpoint] = only(template, "AWS::EC2::VPCEndpoint", "OutboxEventBridgeEndpoint");
    expect(JSON.stringify(endpoint.Properties?.ServiceName)).toMatch(/\.events"/);
    expect(endpoint.Properties?.PrivateDnsEnabled).toBe(true);
    const [groupId] = only(template, "AWS::EC2::SecurityGroup", "OutboxFunctionsSecurityGroup");
    const endpointGroup = (propsOf(endpoint).SecurityGroupIds as { "Fn::GetAtt": string[] }[])[0];
    template.hasResourceProperties("AWS::EC2::SecurityGroupEgress", {
      GroupId: { "Fn::GetAtt": [groupId, "GroupId"] },
      DestinationSecurityGroupId: endpointGroup,
      FromPort: 443,
    });
    expect(endpointId).toBeDefined();
  });

  it("uses the bus endpoint given instead of creating one", () => {
    const template = busStack((stack, vpc) => {
      const eventsEndpoint = new ec2.InterfaceVpcEndpoint(stack, "EventsEndpoint", {
        vpc,
        service: ec2.InterfaceVpcEndpointAwsService.EVENTBRIDGE,
        open: false,
      });
      return { vpcEndpoints: [eventsEndpoint], eventBridgeEndpoint: eventsEndpoint };
    });
    template.resourceCountIs("AWS::EC2::VPCEndpoint", 1);
    // And no endpoint at all without vpcEndpoints (a NAT route reaches EventBridge already).
    busStack(() => ({})).resourceCountIs("AWS::EC2::VPCEndpoint", 0);
  });

  it("leaves the example's cluster identifier to CloudFormation, so an update may replace the cluster (issue 29)", () => {
    for (const name of ["Example", `Orders${"x".repeat(60)}`]) {
      const [, cluster] = only(exampleApp({}, name).template, "AWS::RDS::DBCluster", "Database");
      expect(cluster.Properties?.DBClusterIdentifier).toBeUndefined();
    }
  });

  it("grants the relay a customer key only through SQS (kms:ViaService)", () => {
    const { template } = outboxStack(
      (stack) => ({ queueEncryptionKey: new kms.Key(stack, "QueueKey", { enableKeyRotation: true }) }),
      { env: { account: "123456789012", region: "eu-west-1" } },
    );
    const grants = identityStatements(template).filter(({ statement }) =>
      asArray(statement.Action as string | string[]).includes("kms:GenerateDataKey"),
    );
    expect(grants.map(({ statement }) => statement.Condition)).toEqual([
      // The partition's URL suffix, not amazonaws.com (issue 29): amazonaws.com.cn in China.
      {
        StringEquals: {
          "kms:ViaService": { "Fn::Join": ["", ["sqs.eu-west-1.", { Ref: "AWS::URLSuffix" }]] },
        },
      },
    ]);
  });

  it("states the worst-case number of database sessions the relay can open", () => {
    expect(outboxStack().relay.maxRelaySessions).toBe(16);
    expect(outboxStack(() => ({ relays: 5 })).relay.maxRelaySessions).toBe(80);
    expect(outboxStack(() => ({ relays: 5, relay: { listen: true } })).relay.maxRelaySessions).toBe(100);
    expect(relayTiming({ scheduleSeconds: 60 }).concurrencyPerRelay).toBe(4);
  });
});

describe("a separate database secret per role", () => {
  it("gives the relay and the purge their own secrets, the migrations the admin one", () => {
    const stack = new Stack(newApp(), "Roles");
    const { vpc, secret } = importedNetwork(stack);
    const secretArn = (name: string) => `arn:aws:secretsmanager:eu-west-1:123456789012:secret:${name}-AbCdEf`;
    const relaySecret = secretsmanager.Secret.fromSecretCompleteArn(stack, "RelaySecret", secretArn("relay"));
    const purgeSecret = secretsmanager.Secret.fromSecretCompleteArn(stack, "PurgeSecret", secretArn("purge"));
    new OutboxRelay(stack, "Outbox", { database: { secret, vpc, relaySecret, purgeSecret } });
    const template = Template.fromStack(stack);
    const env = (prefix: string) =>
      (
        propsOf(only(template, "AWS::Lambda::Function", prefix)[1]).Environment as {
          Variables: Record<string, unknown>;
        }
      ).Variables.DATABASE_SECRET_ARN;
    expect(env("OutboxRelayFunction")).toBe(secretArn("relay"));
    expect(env("OutboxPurgeFunction")).toBe(secretArn("purge"));
    expect(env("OutboxMigrateFunction")).toBe(secret.secretArn);
    const reads = (role: string) =>
      identityStatements(template)
        .filter(
          ({ source, statement }) =>
            source.startsWith(role) && statement.Action === "secretsmanager:GetSecretValue",
        )
        .map(({ statement }) => statement.Resource);
    expect(reads("OutboxRelayRole")).toEqual([secretArn("relay")]);
    expect(reads("OutboxPurgeRole")).toEqual([secretArn("purge")]);
    expect(reads("OutboxMigrateRole")).toEqual([secret.secretArn]);
    expect(nagFindings(stack)).toEqual([]);
  });
});
