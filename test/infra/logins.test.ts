import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as kms from "aws-cdk-lib/aws-kms";
import * as rds from "aws-cdk-lib/aws-rds";
import { describe, expect, it } from "vitest";
import { examplePropsFromContext, OutboxExampleStack } from "../../infra/exampleStack.ts";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import {
  identityStatements,
  importedNetwork,
  nagFindings,
  newApp,
  type Resource,
} from "../support/template.ts";

/** Issue 29, item 4: the relay and the purge get logins of their own, generated, made at deploy, rotated. */
function example(context: Record<string, unknown> = {}) {
  const app = newApp(context);
  const stack = new OutboxExampleStack(app, "Example", examplePropsFromContext(app.node));
  const template = Template.fromStack(stack);
  return { stack, template, all: template.toJSON().Resources as Record<string, Resource> };
}

const ofType = (all: Record<string, Resource>, type: string) =>
  Object.entries(all).filter(([, resource]) => resource.Type === type);

function functionEnv(all: Record<string, Resource>, description: RegExp): Record<string, unknown> {
  const found = ofType(all, "AWS::Lambda::Function").find(([, r]) =>
    description.test(String(r.Properties?.Description)),
  );
  const environment = found?.[1].Properties?.Environment as
    | { Variables: Record<string, unknown> }
    | undefined;
  if (environment === undefined) throw new Error(`no function described ${description}`);
  return environment.Variables;
}

describe("the relay's and the purge's logins", () => {
  const { all, template, stack } = example();
  const logins = ofType(all, "AWS::SecretsManager::Secret").filter(([id]) => /LoginSecret/.test(id));
  const attachments = ofType(all, "AWS::SecretsManager::SecretTargetAttachment").filter(([id]) =>
    /LoginSecret/.test(id),
  );
  const attachmentOf = (job: string) => attachments.find(([id]) => id.includes(job))?.[0] as string;
  const [[migrations]] = ofType(all, "Custom::OutboxMigrations") as [[string, Resource]];

  it("are two generated secrets, each naming its user and the master secret, attached to the cluster", () => {
    expect(logins.map(([id]) => id.replace(/[0-9A-F]{8}$/, ""))).toEqual([
      "OutboxRelayLoginSecret",
      "OutboxPurgeLoginSecret",
    ]);
    for (const [, secret] of logins) {
      const generate = secret.Properties?.GenerateSecretString as { SecretStringTemplate: unknown };
      expect(JSON.stringify(generate.SecretStringTemplate)).toMatch(/username.*_(relay|purge)_[0-9a-f]{8}/);
      expect(JSON.stringify(generate.SecretStringTemplate)).toContain("masterarn");
    }
    expect(attachments).toHaveLength(2);
    for (const [, attachment] of attachments) {
      expect(attachment.Properties?.TargetType).toBe("AWS::RDS::DBCluster");
    }
  });

  it("are what the relay and the purge connect with, and what the migrate Lambda makes logins from", () => {
    expect(functionEnv(all, /^Outbox relay/).DATABASE_SECRET_ARN).toEqual({ Ref: attachmentOf("Relay") });
    expect(functionEnv(all, /^Outbox purge/).DATABASE_SECRET_ARN).toEqual({ Ref: attachmentOf("Purge") });
    const migrate = functionEnv(all, /^Outbox migrations/);
    expect(migrate.OUTBOX_RELAY_LOGIN_SECRET_ARN).toEqual({ Ref: attachmentOf("Relay") });
    expect(migrate.OUTBOX_PURGE_LOGIN_SECRET_ARN).toEqual({ Ref: attachmentOf("Purge") });
    // The migrations still run as the master user.
    expect(migrate.DATABASE_SECRET_ARN).not.toEqual({ Ref: attachmentOf("Relay") });
  });

  it("let each function read its own secret only", () => {
    const reads = identityStatements(template).filter(({ statement }) =>
      JSON.stringify(statement.Action).includes("secretsmanager:GetSecretValue"),
    );
    const readsOf = (role: RegExp) =>
      reads.filter(({ source }) => role.test(source)).flatMap(({ statement }) => [statement.Resource].flat());
    expect(readsOf(/^OutboxRelayRole/)).toEqual([{ Ref: attachmentOf("Relay") }]);
    expect(readsOf(/^OutboxPurgeRole/)).toEqual([{ Ref: attachmentOf("Purge") }]);
    expect(readsOf(/^OutboxMigrateRole/)).toHaveLength(3);
  });

  it("rotate with AWS's multi-user rotation, each schedule created after the migrations made its login", () => {
    const schedules = ofType(all, "AWS::SecretsManager::RotationSchedule").filter(([id]) =>
      /LoginSecret/.test(id),
    );
    expect(schedules).toHaveLength(2);
    for (const [, schedule] of schedules) expect(schedule.DependsOn).toContain(migrations);
    const applications = ofType(all, "AWS::Serverless::Application").map(([, r]) =>
      JSON.stringify(r.Properties),
    );
    expect(applications.filter((app) => app.includes("masterSecretArn"))).toHaveLength(2);
    expect(JSON.stringify(template.toJSON().Mappings)).toContain(
      "SecretsManagerRDSPostgreSQLRotationMultiUser",
    );
  });

  it("give each rotation Lambda a log group with retention before its first rotation, and one alarm for both", () => {
    const loginApps = ofType(all, "AWS::Serverless::Application")
      .map(([, r]) => r.Properties?.Parameters as Record<string, unknown>)
      .filter((parameters) => "masterSecretArn" in parameters);
    const names = loginApps.map((parameters) => parameters.functionName as string);
    expect(names).toHaveLength(2);
    const groups = ofType(all, "AWS::Logs::LogGroup").filter(([id]) => /LoginRotationLogs/.test(id));
    expect(groups.map(([, g]) => g.Properties?.LogGroupName).sort()).toEqual(
      names.map((name) => `/aws/lambda/${name}`).sort(),
    );
    for (const [, group] of groups) expect(group.Properties?.RetentionInDays).toBe(30);
    // The schedule's creation runs the first rotation: Lambda must find the group already there.
    const schedules = ofType(all, "AWS::SecretsManager::RotationSchedule").filter(([id]) =>
      /LoginSecret/.test(id),
    );
    for (const [id, schedule] of schedules) {
      const job = id.includes("Relay") ? "Relay" : "Purge";
      const group = groups.find(([groupId]) => groupId.includes(job))?.[0];
      expect(schedule.DependsOn, id).toContain(group);
    }
    const [alarm, ...more] = ofType(all, "AWS::CloudWatch::Alarm").filter(([id]) =>
      /LoginRotationErrorsAlarm/.test(id),
    );
    expect(more).toHaveLength(0);
    const metrics = (alarm?.[1].Properties?.Metrics ?? []) as {
      MetricStat?: { Metric: { MetricName: string; Dimensions: { Value: unknown }[] }; Period: number };
    }[];
    const watched = metrics.flatMap((m) => (m.MetricStat === undefined ? [] : [m.MetricStat]));
    expect(watched.map((stat) => stat.Metric.Dimensions[0]?.Value).sort()).toEqual([...names].sort());
    expect(watched.every((stat) => stat.Metric.MetricName === "Errors" && stat.Period === 300)).toBe(true);
    // 4 x 5 minutes: Lambda's longest timeout (the application's own is not known here) plus a period.
    expect(alarm?.[1].Properties).toMatchObject({ EvaluationPeriods: 4, DatapointsToAlarm: 1, Threshold: 1 });
  });

  it("start after the master secret's own rotation, which briefly invalidates what they log in with (issue 40)", () => {
    const all_ = ofType(all, "AWS::SecretsManager::RotationSchedule");
    const master = all_.filter(([id]) => !/LoginSecret/.test(id));
    expect(master).toHaveLength(1);
    const logins_ = all_.filter(([id]) => /LoginSecret/.test(id));
    expect(logins_).toHaveLength(2);
    for (const [id, schedule] of logins_) expect(schedule.DependsOn, id).toContain(master[0]?.[0]);
  });

  it("pass cdk-nag, with rotation and without", () => {
    expect(nagFindings(stack)).toEqual([]);
    expect(nagFindings(example({ secretRotation: "false" }).stack)).toEqual([]);
  });
});

/**
 * Issue 40, item 6: a service's own app (imported cluster and VPC, closed endpoints, the default logins): the login
 * rotations must reach Secrets Manager through the endpoint, which must let their group in.
 */
describe("login rotations behind VPC endpoints", () => {
  function userApp() {
    const stack = new Stack(newApp(), "Service");
    const { vpc, secret } = importedNetwork(stack);
    const databaseGroup = ec2.SecurityGroup.fromSecurityGroupId(
      stack,
      "DatabaseGroup",
      "sg-0d0d0d0d0d0d0d0d0",
    );
    const cluster = rds.DatabaseCluster.fromDatabaseClusterAttributes(stack, "Cluster", {
      clusterIdentifier: "orders",
      clusterEndpointAddress: "orders.cluster-abc.eu-west-1.rds.amazonaws.com",
      port: 5432,
      engine: rds.DatabaseClusterEngine.auroraPostgres({ version: rds.AuroraPostgresEngineVersion.VER_16_4 }),
      securityGroups: [databaseGroup],
      secret,
    });
    const endpoint = (id: string, service: ec2.InterfaceVpcEndpointAwsService) =>
      new ec2.InterfaceVpcEndpoint(stack, id, { vpc, service, open: false });
    const secrets = endpoint("SecretsEndpoint", ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER);
    new OutboxRelay(stack, "Outbox", {
      database: {
        cluster,
        vpc,
        vpcEndpoints: [secrets, endpoint("SqsEndpoint", ec2.InterfaceVpcEndpointAwsService.SQS)],
      },
    });
    return { template: Template.fromStack(stack), stack, secrets };
  }

  it("give the rotations the Secrets Manager endpoint, and let their group into it on 443", () => {
    const { template, stack, secrets } = userApp();
    const all = template.toJSON().Resources as Record<string, Resource>;
    const endpointGroup = stack.resolve(secrets.connections.securityGroups[0]?.securityGroupId);
    const apps = ofType(all, "AWS::Serverless::Application")
      .map(([, r]) => r.Properties?.Parameters as Record<string, unknown>)
      .filter((parameters) => "masterSecretArn" in parameters);
    expect(apps).toHaveLength(2);
    for (const parameters of apps) {
      expect(JSON.stringify(parameters.endpoint)).toContain("SecretsEndpoint");
      const groups = [parameters.vpcSecurityGroupIds].flat();
      expect(groups).toHaveLength(1);
      template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
        GroupId: endpointGroup,
        SourceSecurityGroupId: groups[0],
        FromPort: 443,
        ToPort: 443,
      });
    }
  });
});

/**
 * Issue 40, item 9: an imported master secret under a customer managed key. Secret.fromSecretCompleteArn carries no
 * key, so the migrate role got no kms:Decrypt and the rotation application no master key: the migrations' custom
 * resource failed the first deploy with KMS AccessDenied. `database.secretEncryptionKey` names it.
 */
describe("an imported master secret under a customer managed key", () => {
  const KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";

  function userApp() {
    const stack = new Stack(newApp(), "Service");
    const { vpc, secret } = importedNetwork(stack);
    const cluster = rds.DatabaseCluster.fromDatabaseClusterAttributes(stack, "Cluster", {
      clusterIdentifier: "orders",
      clusterEndpointAddress: "orders.cluster-abc.eu-west-1.rds.amazonaws.com",
      port: 5432,
      engine: rds.DatabaseClusterEngine.auroraPostgres({ version: rds.AuroraPostgresEngineVersion.VER_16_4 }),
      securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, "DatabaseGroup", "sg-0d0d0d0d0d0d0d0d0")],
      secret,
    });
    new OutboxRelay(stack, "Outbox", {
      database: { cluster, vpc, secretEncryptionKey: kms.Key.fromKeyArn(stack, "SecretKey", KEY_ARN) },
    });
    return Template.fromStack(stack);
  }

  const template = userApp();
  const all = template.toJSON().Resources as Record<string, Resource>;

  it("lets the migrate role (and the relay's and purge's) decrypt it through Secrets Manager only", () => {
    const decrypts = identityStatements(template).filter(
      ({ statement }) =>
        JSON.stringify(statement.Action).includes("kms:Decrypt") && statement.Resource === KEY_ARN,
    );
    const sources = decrypts.map(({ source }) => source.replace(/[0-9A-F]{8}$/, ""));
    expect(sources).toEqual(expect.arrayContaining([expect.stringMatching(/^OutboxMigrate/)]));
    for (const { statement } of decrypts) {
      expect(statement.Condition).toEqual({
        StringEquals: {
          "kms:ViaService": {
            "Fn::Join": ["", ["secretsmanager.", { Ref: "AWS::Region" }, ".", { Ref: "AWS::URLSuffix" }]],
          },
        },
      });
    }
  });

  it("encrypts the logins' secrets with it and gives their rotations the master secret's key", () => {
    const logins = ofType(all, "AWS::SecretsManager::Secret").filter(([id]) => /LoginSecret/.test(id));
    expect(logins).toHaveLength(2);
    for (const [, secret] of logins) expect(secret.Properties?.KmsKeyId).toBe(KEY_ARN);
    const apps = ofType(all, "AWS::Serverless::Application")
      .map(([, r]) => r.Properties?.Parameters as Record<string, unknown>)
      .filter((parameters) => "masterSecretArn" in parameters);
    expect(apps).toHaveLength(2);
    for (const parameters of apps) expect(parameters.masterSecretKmsKeyArn).toBe(KEY_ARN);
  });
});
