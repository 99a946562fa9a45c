import { Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { describe, expect, it } from "vitest";
import { type OutboxDatabaseProps, OutboxRelay } from "../../infra/outboxRelay.ts";
import { newApp } from "../support/template.ts";

/**
 * The construct against the database the user already has, named the way they have it: a cluster or an instance
 * (created in the app or imported from attributes), its secret, and producers that must reach it. In-process
 * synthesis with bundling skipped: these look at the template only.
 */

const SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders/database-AbCdEf";
const DATABASE_GROUP = "sg-0a1b2c3d4e5f67890";

function stackWith(database: (stack: Stack, vpc: ec2.IVpc) => Omit<OutboxDatabaseProps, "vpc">) {
  const stack = new Stack(newApp(), "Orders", { env: { account: "123456789012", region: "eu-west-1" } });
  const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
    vpcId: "vpc-0a1b2c3d4e5f67890",
    availabilityZones: ["eu-west-1a", "eu-west-1b"],
    privateSubnetIds: ["subnet-0a1b2c3d4e5f67890", "subnet-0b1c2d3e4f5a67890"],
    privateSubnetRouteTableIds: ["rtb-0a1b2c3d4e5f67890", "rtb-0b1c2d3e4f5a67890"],
  });
  const outbox = new OutboxRelay(stack, "Outbox", { database: { vpc, ...database(stack, vpc) } });
  return { stack, outbox, template: () => Template.fromStack(stack) };
}

function importedCluster(stack: Stack, secret?: secretsmanager.ISecret) {
  return rds.DatabaseCluster.fromDatabaseClusterAttributes(stack, "Database", {
    clusterIdentifier: "orders",
    clusterEndpointAddress: "orders.cluster-c1a2b3c4d5e6.eu-west-1.rds.amazonaws.com",
    port: 5432,
    securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, "DatabaseGroup", DATABASE_GROUP)],
    ...(secret === undefined ? {} : { secret }),
  });
}

const environments = (template: Template) =>
  Object.values(template.findResources("AWS::Lambda::Function")).map(
    (fn) => fn.Properties.Environment?.Variables as Record<string, unknown> | undefined,
  );
/** The relay runs as its own login (a secret the construct creates), the migrations as the given secret's user. */
const loginSecret = { Ref: Match.stringLikeRegexp("^OutboxRelayLoginSecretAttachment") };
const expectMigrationsSecret = (template: Template, secretArn: unknown) =>
  expect(environments(template)).toContainEqual(
    expect.objectContaining({
      DATABASE_SECRET_ARN: secretArn,
      OUTBOX_RELAY_LOGIN_SECRET_ARN: expect.anything(),
    }),
  );

describe("OutboxRelay against an existing database", () => {
  it("an imported cluster: its port opened to the Lambdas' group, the secret given beside it", () => {
    const { template } = stackWith((stack) => ({
      cluster: importedCluster(stack),
      secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET_ARN),
    }));
    const t = template();
    t.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: DATABASE_GROUP,
      IpProtocol: "tcp",
      FromPort: 5432,
      ToPort: 5432,
      SourceSecurityGroupId: {
        "Fn::GetAtt": [Match.stringLikeRegexp("^OutboxFunctionsSecurityGroup"), "GroupId"],
      },
    });
    t.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({ OUTBOX_QUEUE_URL: Match.anyValue(), DATABASE_SECRET_ARN: loginSecret }),
      },
    });
    expectMigrationsSecret(t, SECRET_ARN);
  });

  it("the secret defaults to the one the imported cluster's attributes name", () => {
    const { template, outbox } = stackWith((stack) => ({
      cluster: importedCluster(
        stack,
        secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET_ARN),
      ),
    }));
    expect(outbox.databaseSecret.secretArn).toBe(SECRET_ARN);
    expectMigrationsSecret(template(), SECRET_ARN);
  });

  it("a cluster created in the same app: its generated secret, and the migrations wait for cluster and writer", () => {
    const { template } = stackWith((stack, vpc) => ({
      cluster: new rds.DatabaseCluster(stack, "Database", {
        engine: rds.DatabaseClusterEngine.auroraPostgres({
          version: rds.AuroraPostgresEngineVersion.VER_17_5,
        }),
        writer: rds.ClusterInstance.serverlessV2("Writer"),
        vpc,
        storageEncrypted: true,
      }),
    }));
    const t = template();
    const attachments = Object.keys(t.findResources("AWS::SecretsManager::SecretTargetAttachment"));
    const master = attachments.find((id) => id.startsWith("DatabaseSecretAttachment"));
    expectMigrationsSecret(t, { Ref: master });
    t.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({ OUTBOX_QUEUE_URL: Match.anyValue(), DATABASE_SECRET_ARN: loginSecret }),
      },
    });
    const migrations = Object.values(t.findResources("Custom::OutboxMigrations"))[0];
    const [cluster] = Object.keys(t.findResources("AWS::RDS::DBCluster"));
    const [writer] = Object.keys(t.findResources("AWS::RDS::DBInstance"));
    expect(migrations?.DependsOn).toEqual(expect.arrayContaining([cluster, writer]));
  });

  it("an imported instance: its port (here 5433) opened to the Lambdas", () => {
    const { template } = stackWith((stack) => ({
      instance: rds.DatabaseInstance.fromDatabaseInstanceAttributes(stack, "Database", {
        instanceIdentifier: "orders",
        instanceEndpointAddress: "orders.c1a2b3c4d5e6.eu-west-1.rds.amazonaws.com",
        port: 5433,
        securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, "DatabaseGroup", DATABASE_GROUP)],
      }),
      secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET_ARN),
    }));
    template().hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: DATABASE_GROUP,
      FromPort: 5433,
      ToPort: 5433,
    });
  });

  it("refuses a database without a secret, or given twice, naming the props", () => {
    expect(() => stackWith((stack) => ({ cluster: importedCluster(stack) }))).toThrow(
      /database\.secret is required.*attributes name it/s,
    );
    expect(() =>
      stackWith((stack) => ({
        cluster: importedCluster(stack),
        instance: rds.DatabaseInstance.fromDatabaseInstanceAttributes(stack, "Instance", {
          instanceIdentifier: "x",
          instanceEndpointAddress: "x.eu-west-1.rds.amazonaws.com",
          port: 5432,
          securityGroups: [],
        }),
        secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET_ARN),
      })),
    ).toThrow(/either `cluster` or `instance`, not both/);
  });
});

describe("OutboxRelay.grantEnqueue", () => {
  it("lets a producer's security group reach the database port, and grants it nothing in IAM", () => {
    const database = (s: Stack) => ({
      cluster: importedCluster(s),
      secret: secretsmanager.Secret.fromSecretCompleteArn(s, "Secret", SECRET_ARN),
    });
    const without = stackWith(database).template();
    const { stack, outbox, template } = stackWith(database);
    outbox.grantEnqueue(
      ec2.SecurityGroup.fromSecurityGroupId(stack, "OrdersService", "sg-0c1d2e3f4a5b67890"),
    );
    const t = template();
    t.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: DATABASE_GROUP,
      FromPort: 5432,
      SourceSecurityGroupId: "sg-0c1d2e3f4a5b67890",
      Description: "Outbox producer to the database",
    });
    // The INSERT is the database user's privilege; no IAM policy or role changes.
    for (const type of ["AWS::IAM::Policy", "AWS::IAM::Role"]) {
      expect(t.findResources(type), type).toEqual(without.findResources(type));
    }
  });

  it("needs the database's security groups, and says which props give them", () => {
    const { stack, outbox } = stackWith((s) => ({
      secret: secretsmanager.Secret.fromSecretCompleteArn(s, "Secret", SECRET_ARN),
    }));
    expect(() => outbox.grantEnqueue(ec2.SecurityGroup.fromSecurityGroupId(stack, "P", "sg-1"))).toThrow(
      /database\.cluster, database\.instance or database\.connections/,
    );
  });
});
