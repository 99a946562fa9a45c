import { join } from "node:path";
import { Duration, Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as kms from "aws-cdk-lib/aws-kms";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { eventBridgeMaxRequestBytes } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { OutboxConsumer } from "../../infra/consumer.ts";
import { examplePropsFromContext, OutboxExampleStack } from "../../infra/exampleStack.ts";
import { OutboxRelay, PROJECT_ROOT } from "../../infra/outboxRelay.ts";
import {
  identityStatements,
  importedNetwork,
  nagFindings,
  newApp,
  type Resource,
} from "../support/template.ts";

/** Issue 29, items 2, 3, 5, 6 and 7, on the synthesized templates (bundling skipped). */
function example(context: Record<string, unknown> = {}) {
  const app = newApp(context);
  const stack = new OutboxExampleStack(app, "Example", examplePropsFromContext(app.node));
  const template = Template.fromStack(stack);
  return {
    stack,
    template,
    all: template.toJSON().Resources as Record<string, Resource & Record<string, unknown>>,
  };
}

function ofType(all: Record<string, Resource>, type: string): [string, Resource & Record<string, unknown>][] {
  return Object.entries(all).filter(([, r]) => r.Type === type) as [
    string,
    Resource & Record<string, unknown>,
  ][];
}

/** Every resource `id` waits for, directly or through the resources it waits for. */
function dependsOnTransitively(all: Record<string, Resource>, id: string): Set<string> {
  const seen = new Set<string>();
  const visit = (current: string) => {
    for (const next of all[current]?.DependsOn ?? []) {
      if (seen.has(next)) continue;
      seen.add(next);
      visit(next);
    }
  };
  visit(id);
  return seen;
}

describe("item 2: a first deploy that cannot race the rotation and can roll back", () => {
  const { all } = example();
  const [[migrations]] = ofType(all, "Custom::OutboxMigrations") as [[string, Resource]];
  const [[schedule, scheduleResource]] = ofType(all, "AWS::SecretsManager::RotationSchedule") as [
    [string, Resource],
  ];

  it("migrates before the rotation schedule exists (creating it rotates at once), never after", () => {
    expect(dependsOnTransitively(all, migrations)).not.toContain(schedule);
    expect(scheduleResource.DependsOn).toContain(migrations);
    // Still after the cluster, its writer and the secret's attachment.
    const waits = dependsOnTransitively(all, migrations);
    for (const type of [
      "AWS::RDS::DBCluster",
      "AWS::RDS::DBInstance",
      "AWS::SecretsManager::SecretTargetAttachment",
    ]) {
      // The logins' secrets are read by the migrations (their function refers to them), not waited for here.
      for (const [id] of ofType(all, type).filter(([id]) => !/Login/.test(id))) expect(waits).toContain(id);
    }
  });

  it("keeps the cluster and its secret on deletion or replacement, but lets a failed create roll back", () => {
    const cluster = ofType(all, "AWS::RDS::DBCluster")[0]?.[1];
    expect(cluster?.Properties?.DeletionProtection).not.toBe(true);
    expect(cluster?.DeletionPolicy).toBe("RetainExceptOnCreate");
    expect(cluster?.UpdateReplacePolicy).toBe("Retain");
    const secret = ofType(all, "AWS::SecretsManager::Secret")[0]?.[1];
    expect(secret?.DeletionPolicy).toBe("RetainExceptOnCreate");
    // RDS's own protection when asked for (a later deploy), and everything deleted for a throw-away stack.
    const asked = example({ clusterDeletionProtection: "true" }).all;
    expect(ofType(asked, "AWS::RDS::DBCluster")[0]?.[1].Properties?.DeletionProtection).toBe(true);
    const throwAway = example({ deletionProtection: "false" }).all;
    expect(ofType(throwAway, "AWS::RDS::DBCluster")[0]?.[1].DeletionPolicy).toBe("Delete");
  });
});

describe("item 5: a cluster that can be replaced, on an orderable engine", () => {
  const { all } = example();
  const cluster = ofType(all, "AWS::RDS::DBCluster")[0]?.[1];

  it("has no fixed identifier, and the latest 17 minor this CDK knows", () => {
    expect(cluster?.Properties?.DBClusterIdentifier).toBeUndefined();
    const known = Object.keys(rds.AuroraPostgresEngineVersion)
      .filter((name) => /^VER_17_\d+$/.test(name))
      .map((name) => Number(name.slice("VER_17_".length)));
    expect(cluster?.Properties?.EngineVersion).toBe(`17.${Math.max(...known)}`);
  });

  it("still sets the exported log group's retention, by the cluster's generated name", () => {
    const retention = ofType(all, "Custom::LogRetention").map(([, r]) => JSON.stringify(r.Properties));
    expect(retention.some((text) => text.includes("/aws/rds/cluster/") && text.includes("postgresql"))).toBe(
      true,
    );
  });
});

describe("item 6: the migrations wait for the security group rules they need", () => {
  const SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders/database-AbCdEf";
  function migrationsDependsOn(database: (stack: Stack) => Record<string, unknown>) {
    const stack = new Stack(newApp(), "Orders", { env: { account: "123456789012", region: "eu-west-1" } });
    const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
      vpcId: "vpc-0a1b2c3d4e5f67890",
      availabilityZones: ["eu-west-1a"],
      privateSubnetIds: ["subnet-0a1b2c3d4e5f67890"],
      privateSubnetRouteTableIds: ["rtb-0a1b2c3d4e5f67890"],
    });
    const endpoint = ec2.InterfaceVpcEndpoint.fromInterfaceVpcEndpointAttributes(stack, "SecretsEndpoint", {
      vpcEndpointId: "vpce-0123456789abcdef0",
      port: 443,
      securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, "EndpointGroup", "sg-0e0e0e0e0e0e0e0e0")],
    });
    new OutboxRelay(stack, "Outbox", {
      database: {
        vpc,
        secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET_ARN),
        vpcEndpoints: [endpoint],
        ...database(stack),
      },
    } as ConstructorParameters<typeof OutboxRelay>[2]);
    const all = Template.fromStack(stack).toJSON().Resources as Record<string, Resource>;
    const [[migrations]] = ofType(all, "Custom::OutboxMigrations") as [[string, Resource]];
    const rules = [
      ...ofType(all, "AWS::EC2::SecurityGroupIngress"),
      ...ofType(all, "AWS::EC2::SecurityGroupEgress"),
    ];
    return { waits: dependsOnTransitively(all, migrations), rules: rules.map(([id]) => id) };
  }

  it("an existing database given by its security group", () => {
    const { waits, rules } = migrationsDependsOn((stack) => ({
      connections: new ec2.Connections({
        securityGroups: [
          ec2.SecurityGroup.fromSecurityGroupId(stack, "DatabaseGroup", "sg-0a1b2c3d4e5f67890"),
        ],
        defaultPort: ec2.Port.tcp(5432),
      }),
    }));
    expect(rules.length).toBeGreaterThanOrEqual(3); // database ingress, endpoint ingress, our egress to both
    for (const rule of rules) expect(waits).toContain(rule);
  });

  it("an imported cluster", () => {
    const { waits, rules } = migrationsDependsOn((stack) => ({
      cluster: rds.DatabaseCluster.fromDatabaseClusterAttributes(stack, "Database", {
        clusterIdentifier: "orders",
        clusterEndpointAddress: "orders.cluster-c1a2b3c4d5e6.eu-west-1.rds.amazonaws.com",
        port: 5432,
        securityGroups: [
          ec2.SecurityGroup.fromSecurityGroupId(stack, "DatabaseGroup", "sg-0a1b2c3d4e5f67890"),
        ],
      }),
    }));
    expect(rules.length).toBeGreaterThanOrEqual(3);
    for (const rule of rules) expect(waits).toContain(rule);
  });
});

describe("item 7: partitions, retention, costs", () => {
  it("builds kms:ViaService with the partition's URL suffix", () => {
    const stack = new Stack(newApp(), "China", { env: { account: "123456789012", region: "cn-north-1" } });
    const { vpc } = importedNetwork(stack);
    const key = new kms.Key(stack, "SecretKey", { enableKeyRotation: true });
    const secret = secretsmanager.Secret.fromSecretAttributes(stack, "Db", {
      secretCompleteArn: "arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:db-AbCdEf",
      encryptionKey: key,
    });
    new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      queueEncryptionKey: new kms.Key(stack, "QueueKey", { enableKeyRotation: true }),
    });
    const template = Template.fromStack(stack);
    const services = [
      ...identityStatements(template).map(({ statement }) => statement),
      ...Object.values(template.findResources("AWS::KMS::Key")).flatMap(
        (k) =>
          (k as { Properties: { KeyPolicy: { Statement: Record<string, unknown>[] } } }).Properties.KeyPolicy
            .Statement,
      ),
    ]
      .map(
        (statement) =>
          (statement.Condition as { StringEquals?: Record<string, unknown> } | undefined)?.StringEquals?.[
            "kms:ViaService"
          ],
      )
      .filter((value) => value !== undefined)
      .map((value) => JSON.stringify(value));
    expect(services.length).toBeGreaterThan(0);
    for (const service of services) expect(service).not.toMatch(/amazonaws\.com"/);
    expect(
      services.some((service) => service.includes("amazonaws.com.cn") || service.includes("AWS::URLSuffix")),
    ).toBe(true);
  });

  it("assumes EventBridge's 256 KB request limit outside the aws partition", () => {
    expect(eventBridgeMaxRequestBytes("orders", "eu-west-1")).toBe(1_048_575);
    expect(eventBridgeMaxRequestBytes("orders", "cn-north-1")).toBe(262_143);
    expect(eventBridgeMaxRequestBytes("orders", "us-gov-west-1")).toBe(262_143);
    expect(
      eventBridgeMaxRequestBytes("arn:aws-cn:events:cn-north-1:123456789012:event-bus/o", "eu-west-1"),
    ).toBe(262_143);
  });

  it("deletes the alarm topic's key with the stack; sets the rotation Lambda's log retention", () => {
    const { all } = example();
    const keys = ofType(all, "AWS::KMS::Key").filter(([id]) => id.includes("AlarmTopicKey"));
    expect(keys).toHaveLength(1);
    expect(keys[0]?.[1].DeletionPolicy).toBe("Delete");
    expect(keys[0]?.[1].Properties?.PendingWindowInDays).toBe(7);
    const retention = ofType(all, "Custom::LogRetention").map(([, r]) => JSON.stringify(r.Properties));
    expect(retention.some((text) => /\/aws\/lambda\/ExampleDatabaseRotationSingleUser/.test(text))).toBe(
      true,
    );
  });

  it("can leave out the rotation application (regions without it, deploys without CAPABILITY_AUTO_EXPAND)", () => {
    const { all, stack } = example({ secretRotation: "false" });
    expect(ofType(all, "AWS::Serverless::Application")).toHaveLength(0);
    expect(nagFindings(stack)).toEqual([]);
  });

  it("passes cdk-nag with everything above", () => {
    expect(nagFindings(example().stack)).toEqual([]);
  });
});

describe("item 3: OutboxConsumer as docs/consumer.md shows it", () => {
  const ENTRY = join(PROJECT_ROOT, "test/fixtures/consumerHandler.ts");
  function consumerStack(stackName: string) {
    const stack = new Stack(newApp(), stackName, { env: { account: "123456789012", region: "eu-west-1" } });
    const { vpc, secret } = importedNetwork(stack);
    const queue = new sqs.Queue(stack, "Queue", { enforceSSL: true, visibilityTimeout: Duration.minutes(3) });
    const databaseGroup = ec2.SecurityGroup.fromSecurityGroupId(
      stack,
      "DatabaseGroup",
      "sg-0a1b2c3d4e5f67890",
    );
    const endpointGroup = ec2.SecurityGroup.fromSecurityGroupId(
      stack,
      "EndpointGroup",
      "sg-0e0e0e0e0e0e0e0e0",
    );
    const consumer = new OutboxConsumer(stack, "Consumer", {
      queue,
      entry: ENTRY,
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
      vpc,
      databaseSecret: secret,
      databaseName: "billing",
      database: new ec2.Connections({ securityGroups: [databaseGroup], defaultPort: ec2.Port.tcp(5432) }),
      vpcEndpoints: [
        new ec2.Connections({ securityGroups: [endpointGroup], defaultPort: ec2.Port.tcp(443) }),
      ],
    });
    return { stack, consumer, secret, template: Template.fromStack(stack) };
  }

  it("gives the function the database settings databaseSourceFromEnv reads", () => {
    const { template, secret } = consumerStack("Billing");
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({ DATABASE_SECRET_ARN: secret.secretArn, DATABASE_NAME: "billing" }),
      },
    });
  });

  it("is connectable, and opens the database's port and the endpoints to its own security group", () => {
    const { template, consumer, stack } = consumerStack("Billing");
    expect(consumer.connections.securityGroups).toHaveLength(1);
    const group = stack.getLogicalId(
      consumer.connections.securityGroups[0]?.node.defaultChild as ec2.CfnSecurityGroup,
    );
    template.hasResourceProperties("AWS::Lambda::Function", {
      VpcConfig: Match.objectLike({ SecurityGroupIds: [{ "Fn::GetAtt": [group, "GroupId"] }] }),
    });
    template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: "sg-0a1b2c3d4e5f67890",
      FromPort: 5432,
      SourceSecurityGroupId: { "Fn::GetAtt": [group, "GroupId"] },
    });
    template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: "sg-0e0e0e0e0e0e0e0e0",
      FromPort: 443,
      SourceSecurityGroupId: { "Fn::GetAtt": [group, "GroupId"] },
    });
    expect(nagFindings(consumer)).toEqual([]);
  });

  it("names its metrics' service after the stack, so two stacks' consumers do not share an alarm", () => {
    const services = ["Billing", "Shipping"].map((name) => {
      const { template } = consumerStack(name);
      const alarm = Object.values(template.findResources("AWS::CloudWatch::Alarm")).find(
        (a) => (a as { Properties: { MetricName?: string } }).Properties.MetricName === "InboxRecordsFailed",
      ) as { Properties: { Dimensions: { Value: string }[] } };
      return alarm.Properties.Dimensions[0]?.Value;
    });
    expect(services[0]).toContain("Billing");
    expect(services[1]).toContain("Shipping");
    expect(services[0]).not.toBe(services[1]);
  });
});

/**
 * Issue 40, item 5: a first deploy that rolls back (the usual one: a migration that cannot reach the database)
 * must not leave the queue, its DLQ, log groups or the payload bucket behind: the retry would fail with "already
 * exists" on the queue's fixed name. RetainExceptOnCreate keeps them afterwards and deletes them then.
 */
describe("a failed first create", () => {
  it("leaves no stateful resource behind, in the example and the construct with a bucket and a consumer", () => {
    const stack = new Stack(newApp(), "Service");
    const { vpc, secret } = importedNetwork(stack);
    new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      largePayloads: {},
      consumer: { entry: "test/fixtures/consumerHandler.ts" },
    });
    const stateful = ["AWS::SQS::Queue", "AWS::Logs::LogGroup", "AWS::S3::Bucket", "AWS::KMS::Key"];
    for (const all of [
      Template.fromStack(stack).toJSON().Resources as Record<string, Resource>,
      example().all,
    ]) {
      const kept = Object.entries(all)
        .filter(([, r]) => stateful.includes(r.Type))
        .filter(([, r]) => {
          const policy = (r as { DeletionPolicy?: string }).DeletionPolicy;
          return policy !== undefined && policy !== "Delete" && policy !== "RetainExceptOnCreate";
        })
        .map(([id, r]) => `${id}: ${(r as { DeletionPolicy?: string }).DeletionPolicy}`);
      expect(kept).toEqual([]);
    }
    // And each of those kinds is there to be checked.
    const types = new Set(
      Object.values(Template.fromStack(stack).toJSON().Resources as Record<string, Resource>).map(
        (r) => r.Type,
      ),
    );
    for (const type of ["AWS::SQS::Queue", "AWS::Logs::LogGroup", "AWS::S3::Bucket"])
      expect(types).toContain(type);
  });
});
