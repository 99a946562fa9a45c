import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Stack } from "aws-cdk-lib";
import { Match, type Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as events from "aws-cdk-lib/aws-events";
import * as kinesis from "aws-cdk-lib/aws-kinesis";
import * as kms from "aws-cdk-lib/aws-kms";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { parseRoutes } from "../../functions/shared/destinations/routing/routes.ts";
import { routeTableFromEnv } from "../../functions/shared/destinations/routing/table.ts";
import { destinationSettingFromEnv } from "../../functions/shared/destinations/setting.ts";
import { targetName } from "../../functions/shared/destinations/targets.ts";
import type { OutboxRoute } from "../../infra/outboxRelay.ts";
import { cfnLint } from "../support/cdkChecks.ts";
import {
  asArray,
  outboxStack as constructStack,
  deployed,
  identityStatements,
  nagFindings,
  type OutboxRelayProps,
} from "../support/template.ts";

/** Issue 30, the construct: the `routes` prop, its grants, endpoints and per-destination alarms. */
const ACCOUNT = "123456789012";
const arn = (service: string, resource: string) => `arn:aws:${service}:eu-west-1:${ACCOUNT}:${resource}`;

function outboxStack(extra: (stack: Stack) => Partial<OutboxRelayProps>) {
  return constructStack(extra, { name: "Shop", env: { account: ACCOUNT, region: "eu-west-1" } });
}

/** The example, on imported destinations: the five kinds, names known at synth. */
function importedRoutes(stack: Stack): OutboxRoute[] {
  return [
    {
      match: { aggregateType: "order" },
      destination: sqs.Queue.fromQueueArn(stack, "OrdersQueue", arn("sqs", "orders.fifo")),
    },
    {
      match: { eventType: ["payment.*", "refund.*"] },
      destination: sns.Topic.fromTopicArn(stack, "PaymentsTopic", arn("sns", "payments.fifo")),
    },
    {
      match: { aggregateType: "audit" },
      destination: kinesis.Stream.fromStreamArn(stack, "AuditStream", arn("kinesis", "stream/audit")),
    },
    {
      match: { eventType: "notification.*" },
      destination: sqs.Queue.fromQueueArn(stack, "NotificationsQueue", arn("sqs", "notifications")),
    },
    {
      match: { aggregateType: "customer" },
      destination: events.EventBus.fromEventBusArn(stack, "Bus", arn("events", "event-bus/customers")),
    },
  ];
}

/** The environment of the function that has `variable`, its values as CloudFormation would make them. */
function functionEnvironment(template: Template, variable: string): Record<string, unknown> {
  const [found] = Object.values(
    template.findResources("AWS::Lambda::Function", {
      Properties: { Environment: { Variables: Match.objectLike({ [variable]: Match.anyValue() }) } },
    }),
  ) as { Properties: { Environment: { Variables: Record<string, unknown> } } }[];
  if (found === undefined) throw new Error(`no function with ${variable}`);
  const variables = found.Properties.Environment.Variables;
  return Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, deployed(value)]));
}

function relayEnvironment(template: Template, raw = false): Record<string, unknown> {
  const [relay] = Object.values(
    template.findResources("AWS::Lambda::Function", {
      Properties: { Environment: { Variables: Match.objectLike({ RELAY_MODE: Match.anyValue() }) } },
    }),
  ) as { Properties: { Environment: { Variables: Record<string, unknown> } } }[];
  if (relay === undefined) throw new Error("no relay function");
  const variables = relay.Properties.Environment.Variables;
  if (raw) return variables;
  return Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, deployed(value)]));
}

/** Every (action, resource) the relay's role may do on the publishing services, as sorted strings. */
function publishGrants(template: Template): string[] {
  return identityStatements(template)
    .filter(({ source }) => source.startsWith("OutboxRelayRole"))
    .flatMap(({ statement }) =>
      asArray(statement.Action as string | string[]).flatMap((action) =>
        asArray(statement.Resource as unknown).map((resource) => `${action} ${JSON.stringify(resource)}`),
      ),
    )
    .filter((grant) => /^(sqs|sns|kinesis|events|kms):/.test(grant))
    .sort();
}

describe("OutboxRelay routes", () => {
  it("writes OUTBOX_ROUTES that the relay parses back into the routes given, with no default queue", () => {
    const { relay, template } = outboxStack((stack) => ({ routes: importedRoutes(stack) }));
    const environment = relayEnvironment(template);
    expect(typeof environment.OUTBOX_ROUTES).toBe("string");
    expect(parseRoutes(environment.OUTBOX_ROUTES as string)).toEqual([
      {
        match: { aggregateType: ["order"] },
        destination: {
          kind: "sqs-fifo",
          queueUrl: `https://sqs.eu-west-1.amazonaws.com/${ACCOUNT}/orders.fifo`,
          maxMessageBytes: 262_144,
        },
      },
      {
        match: { eventType: ["payment.*", "refund.*"] },
        destination: { kind: "sns-fifo", topicArn: arn("sns", "payments.fifo"), maxMessageBytes: 262_144 },
      },
      {
        match: { aggregateType: ["audit"] },
        destination: { kind: "kinesis", stream: { streamArn: arn("kinesis", "stream/audit") } },
      },
      {
        match: { eventType: ["notification.*"] },
        destination: {
          kind: "sqs",
          queueUrl: `https://sqs.eu-west-1.amazonaws.com/${ACCOUNT}/notifications`,
          maxMessageBytes: 262_144,
        },
      },
      {
        match: { aggregateType: ["customer"] },
        destination: {
          kind: "eventbridge",
          eventBusName: arn("events", "event-bus/customers"),
          source: "outbox-relay",
        },
      },
    ]);
    // The relay's own reader takes the whole environment: routes, no default.
    const setting = destinationSettingFromEnv(environment as Record<string, string>);
    expect(setting).toMatchObject({ kind: "routes" });
    expect(setting).not.toHaveProperty("fallback");
    expect(environment).not.toHaveProperty("OUTBOX_QUEUE_URL");
    expect(environment).not.toHaveProperty("RELAY_MAX_MESSAGE_BYTES");
    template.resourceCountIs("AWS::SQS::Queue", 0);
    expect(relay.queue).toBeUndefined();
  });

  it("keeps a given destination as the default, beside the routes", () => {
    const { template } = outboxStack((stack) => ({
      destination: sqs.Queue.fromQueueArn(stack, "Default", arn("sqs", "rest.fifo")),
      routes: importedRoutes(stack).slice(0, 1),
    }));
    const setting = destinationSettingFromEnv(relayEnvironment(template) as Record<string, string>);
    expect(setting).toMatchObject({
      kind: "routes",
      fallback: { kind: "sqs-fifo", queueUrl: `https://sqs.eu-west-1.amazonaws.com/${ACCOUNT}/rest.fifo` },
    });
  });

  it("refuses at synth what the relay refuses at cold start, naming the route, with the relay's words", () => {
    const queue = (stack: Stack) =>
      (stack.node.tryFindChild("Q") as sqs.IQueue | undefined) ??
      sqs.Queue.fromQueueArn(stack, "Q", arn("sqs", "orders.fifo"));
    const cases: [(stack: Stack) => OutboxRoute[], RegExp][] = [
      [
        (stack) => [
          { match: { aggregateType: "order" }, destination: queue(stack) },
          { match: { aggregateType: "order" }, destination: queue(stack) },
        ],
        /^OutboxRelay routes\[1\] duplicates the match of routes\[0\]/,
      ],
      [
        (stack) => [
          { match: {}, destination: queue(stack) },
          { match: { eventType: "payment.*" }, destination: queue(stack) },
        ],
        /^OutboxRelay routes\[1\] is unreachable: routes\[0\] before it matches every event/,
      ],
      [
        (stack) => [
          { match: { eventType: "payment.*" }, destination: queue(stack) },
          { match: { eventType: "payment.card.*" }, destination: queue(stack) },
        ],
        /^OutboxRelay routes\[1\] is unreachable: every event it matches is taken first by routes\[0\]/,
      ],
      [
        (stack) => [{ match: { eventType: [] }, destination: queue(stack) }],
        /^OutboxRelay routes\[0\]\.match\.eventType must be/,
      ],
      [() => [], /^OutboxRelay routes is an empty list/],
    ];
    for (const [routes, expected] of cases) {
      expect(() => outboxStack((stack) => ({ routes: routes(stack) }))).toThrow(expected);
    }
  });

  it("grants exactly the actions the relay uses on each destination, on that destination only", () => {
    const { template } = outboxStack((stack) => ({ routes: importedRoutes(stack) }));
    expect(publishGrants(template)).toEqual(
      [
        `events:PutEvents "${arn("events", "event-bus/customers")}"`,
        `kinesis:DescribeStreamSummary "${arn("kinesis", "stream/audit")}"`,
        `kinesis:PutRecords "${arn("kinesis", "stream/audit")}"`,
        `sns:GetTopicAttributes "${arn("sns", "payments.fifo")}"`,
        `sns:Publish "${arn("sns", "payments.fifo")}"`,
        `sqs:GetQueueAttributes "${arn("sqs", "notifications")}"`,
        `sqs:GetQueueAttributes "${arn("sqs", "orders.fifo")}"`,
        `sqs:SendMessage "${arn("sqs", "notifications")}"`,
        `sqs:SendMessage "${arn("sqs", "orders.fifo")}"`,
      ].sort(),
    );
  });

  it("grants each destination's key through its service only", () => {
    const { template } = outboxStack((stack) => {
      const key = (id: string) => kms.Key.fromKeyArn(stack, id, arn("kms", `key/${id}`));
      return {
        routes: [
          {
            match: { aggregateType: "order" },
            destination: sqs.Queue.fromQueueAttributes(stack, "Q", {
              queueArn: arn("sqs", "orders.fifo"),
              keyArn: arn("kms", "key/QueueKey"),
            }),
          },
          {
            match: { aggregateType: "payment" },
            destination: new sns.Topic(stack, "T", {
              fifo: true,
              topicName: "payments",
              masterKey: key("TopicKey"),
            }),
          },
          {
            match: { aggregateType: "audit" },
            destination: new kinesis.Stream(stack, "S", {
              encryption: kinesis.StreamEncryption.KMS,
              encryptionKey: key("StreamKey"),
            }),
          },
        ],
      };
    });
    const kmsGrants = identityStatements(template)
      .filter(
        ({ source, statement }) =>
          source.startsWith("OutboxRelayRole") && JSON.stringify(statement.Action).includes("kms:"),
      )
      .map(({ statement }) => ({
        key: String(statement.Resource).replace(/^.*key\//, ""),
        actions: asArray(statement.Action as string | string[]).sort(),
        via: JSON.stringify(
          deployed(
            (statement.Condition as { StringEquals: Record<string, unknown> }).StringEquals["kms:ViaService"],
          ),
        ),
      }))
      .sort((a, b) => a.key.localeCompare(b.key));
    expect(kmsGrants).toEqual([
      {
        key: "QueueKey",
        actions: ["kms:Decrypt", "kms:GenerateDataKey"],
        via: '"sqs.eu-west-1.amazonaws.com"',
      },
      { key: "StreamKey", actions: ["kms:GenerateDataKey"], via: '"kinesis.eu-west-1.amazonaws.com"' },
      {
        key: "TopicKey",
        actions: ["kms:Decrypt", "kms:GenerateDataKey"],
        via: '"sns.eu-west-1.amazonaws.com"',
      },
    ]);
  });

  it("adds an interface endpoint for each service the routes use when the Lambdas are behind endpoints", () => {
    const endpointServices = (extra: (stack: Stack, vpc: ec2.IVpc) => ec2.IConnectable[]) => {
      const { template } = outboxStack((stack) => {
        const vpc = new ec2.Vpc(stack, "Net", { natGateways: 0, maxAzs: 2 });
        return {
          routes: importedRoutes(stack),
          database: {
            vpc,
            secret: stack.node.findChild("Secret") as secretsmanager.ISecret,
            vpcEndpoints: extra(stack, vpc),
          },
        };
      });
      return Object.values(template.findResources("AWS::EC2::VPCEndpoint"))
        .map((endpoint) => String(endpoint.Properties.ServiceName).replace("com.amazonaws.eu-west-1.", ""))
        .sort();
    };
    const secrets = (vpc: ec2.IVpc) =>
      vpc.addInterfaceEndpoint("Secrets", {
        service: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
        open: false,
      });
    expect(endpointServices((_, vpc) => [secrets(vpc)])).toEqual(
      ["events", "kinesis-streams", "secretsmanager", "sns", "sqs"].sort(),
    );
    // An endpoint of a service already among vpcEndpoints is used, not doubled (two with private DNS would clash).
    const sqsGiven = (vpc: ec2.IVpc) =>
      vpc.addInterfaceEndpoint("Sqs", { service: ec2.InterfaceVpcEndpointAwsService.SQS, open: false });
    expect(endpointServices((_, vpc) => [secrets(vpc), sqsGiven(vpc)])).toEqual(
      ["events", "kinesis-streams", "secretsmanager", "sns", "sqs"].sort(),
    );
  });

  it("alarms on each destination's publish failures by its name, graphs each, and drops the total's alarm", () => {
    const { template } = outboxStack((stack) => ({
      destination: sqs.Queue.fromQueueArn(stack, "Default", arn("sqs", "rest.fifo")),
      routes: importedRoutes(stack),
    }));
    const environment = relayEnvironment(template) as Record<string, string>;
    // The names the relay writes in its `destination` dimension, from the environment the construct wrote.
    const setting = destinationSettingFromEnv(environment);
    if (setting.kind !== "routes" || setting.fallback === undefined) throw new Error("routes with a default");
    const names = [
      ...setting.routes.map((route) => targetName(route.destination)),
      targetName(setting.fallback),
    ];
    const alarmed = Object.values(
      template.findResources("AWS::CloudWatch::Alarm", { Properties: { MetricName: "PublishFailures" } }),
    ).map((alarm) => {
      const dimensions = alarm.Properties.Dimensions as { Name: string; Value: string }[];
      expect(alarm.Properties).toMatchObject({ EvaluationPeriods: 5, DatapointsToAlarm: 5, Threshold: 1 });
      return dimensions.find((dimension) => dimension.Name === "destination")?.Value;
    });
    expect(alarmed.sort()).toEqual([...names].sort());
    expect(names).toContain("kinesis:audit");
    const dashboard = JSON.stringify(template.findResources("AWS::CloudWatch::Dashboard"));
    for (const name of names) expect(dashboard).toContain(`label\\":\\"${name}\\"`);
  });

  it("gives the purge the relay's routes, alarms on each destination's oldest pending age, graphs it, no total", () => {
    const { template } = outboxStack((stack) => ({
      destination: sqs.Queue.fromQueueArn(stack, "Default", arn("sqs", "rest.fifo")),
      routes: importedRoutes(stack),
    }));
    const purgeEnvironment = functionEnvironment(template, "PURGE_RETENTION_HOURS");
    const relay = relayEnvironment(template);
    expect(purgeEnvironment.OUTBOX_ROUTES).toEqual(relay.OUTBOX_ROUTES);
    expect(purgeEnvironment.OUTBOX_QUEUE_URL).toEqual(relay.OUTBOX_QUEUE_URL);
    // The names the purge writes in its `destination` dimension, by the relay's reader and matcher.
    const names = (routeTableFromEnv(purgeEnvironment as Record<string, string>)?.lanes ?? []).map(
      (lane) => lane.name,
    );
    expect(names).toEqual([
      "sqs-fifo:orders.fifo",
      "sns-fifo:payments.fifo",
      "kinesis:audit",
      "sqs:notifications",
      "eventbridge:customers",
      "sqs-fifo:rest.fifo",
    ]);
    const alarms = Object.values(
      template.findResources("AWS::CloudWatch::Alarm", {
        Properties: { MetricName: "OldestPendingAgeSeconds" },
      }),
    );
    const alarmed = alarms.map((alarm) => {
      expect(alarm.Properties).toMatchObject({
        Threshold: 900,
        Statistic: "Maximum",
        TreatMissingData: "missing",
      });
      const dimensions = alarm.Properties.Dimensions as { Name: string; Value: unknown }[];
      expect(dimensions.find((dimension) => dimension.Name === "service")?.Value).toMatch(/-purge$/);
      return dimensions.find((dimension) => dimension.Name === "destination")?.Value;
    });
    // One per destination and none outbox-wide: a stalled destination pages once.
    expect(alarmed.sort()).toEqual([...names].sort());
    const dashboard = JSON.stringify(template.findResources("AWS::CloudWatch::Dashboard"));
    expect(dashboard).toContain("Oldest pending age per destination");
    for (const name of names) {
      expect(dashboard).toMatch(
        new RegExp(`OldestPendingAgeSeconds[^\\]]*destination\\\\",\\\\"${name}\\\\"`),
      );
    }
  });

  it("keeps the outbox-wide oldest pending age alarm without routes, and the purge gets no route table", () => {
    const { template } = outboxStack(() => ({}));
    const purgeEnvironment = functionEnvironment(template, "PURGE_RETENTION_HOURS");
    expect(purgeEnvironment).not.toHaveProperty("OUTBOX_ROUTES");
    expect(purgeEnvironment).not.toHaveProperty("OUTBOX_QUEUE_URL");
    const alarms = Object.values(
      template.findResources("AWS::CloudWatch::Alarm", {
        Properties: { MetricName: "OldestPendingAgeSeconds" },
      }),
    );
    expect(alarms).toHaveLength(1);
    expect(JSON.stringify(alarms[0]?.Properties.Dimensions)).not.toContain("destination");
  });

  it("passes cdk-nag and cfn-lint with routes to all five kinds created in the stack, behind endpoints", () => {
    // Environment-agnostic, as synth.test.ts's app: a VPC of a stack with an account would hardcode its zones.
    const { stack, template } = constructStack((scope) => {
      const vpc = new ec2.Vpc(scope, "Net", { natGateways: 0, maxAzs: 2 });
      const key = new kms.Key(scope, "Key", { enableKeyRotation: true });
      const orders = new sqs.Queue(scope, "Orders", {
        fifo: true,
        encryption: sqs.QueueEncryption.KMS,
        encryptionMasterKey: key,
        enforceSSL: true,
        deadLetterQueue: {
          maxReceiveCount: 5,
          queue: new sqs.Queue(scope, "OrdersDlq", { fifo: true, enforceSSL: true }),
        },
      });
      const notifications = new sqs.Queue(scope, "Notifications", {
        enforceSSL: true,
        deadLetterQueue: {
          maxReceiveCount: 5,
          queue: new sqs.Queue(scope, "NotificationsDlq", { enforceSSL: true }),
        },
      });
      const payments = new sns.Topic(scope, "Payments", { fifo: true, masterKey: key, enforceSSL: true });
      const audit = new kinesis.Stream(scope, "Audit", {
        encryption: kinesis.StreamEncryption.KMS,
        encryptionKey: key,
      });
      const bus = new events.EventBus(scope, "Customers");
      return {
        database: {
          vpc,
          secret: scope.node.findChild("Secret") as secretsmanager.ISecret,
          vpcEndpoints: [
            vpc.addInterfaceEndpoint("Secrets", {
              service: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
              open: false,
            }),
          ],
        },
        routes: [
          { match: { aggregateType: "order" }, destination: orders },
          { match: { eventType: ["payment.*", "refund.*"] }, destination: payments },
          { match: { aggregateType: "audit" }, destination: audit },
          { match: { eventType: "notification.*" }, destination: notifications },
          { match: { aggregateType: "customer" }, destination: bus },
        ],
      };
    });
    // Names CloudFormation makes: the table is joined at deploy time, the queue's URL a Ref.
    expect(JSON.stringify(relayEnvironment(template, true).OUTBOX_ROUTES)).toContain("Fn::Join");
    // The test's own VPC, queues and stream are not the construct's: only their findings are left out.
    const ours = nagFindings(stack).filter(
      (finding) => !/ at Consumer\/(Net|Orders|Notifications|Audit|Payments|Customers|Key)/.test(finding),
    );
    expect(ours).toEqual([]);
    const dir = mkdtempSync(join(tmpdir(), "outbox-routes-"));
    try {
      const file = join(dir, "template.json");
      writeFileSync(file, JSON.stringify(template.toJSON(), null, 1));
      const lint = cfnLint(file, process.env);
      expect(lint.status, `cfn-lint found problems:\n${lint.stdout}\n${lint.stderr}`).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
