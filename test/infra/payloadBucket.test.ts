import { Duration, Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as iam from "aws-cdk-lib/aws-iam";
import * as kms from "aws-cdk-lib/aws-kms";
import * as s3 from "aws-cdk-lib/aws-s3";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { OutboxConsumer } from "../../infra/consumer.ts";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { PAYLOAD_EXPIRATION_DAYS } from "../../infra/payloadBucket.ts";
import { relayTiming } from "../../infra/relayTiming.ts";
import {
  identityStatements,
  importedNetwork,
  nagFindings,
  newApp,
  outboxStack,
  type Resource,
  resources,
} from "../support/template.ts";

type EgressRule = { IpProtocol: string; FromPort: number; ToPort: number; CidrIp?: string };

function relayFunction(template: Template): Resource {
  const found = resources(template, "AWS::Lambda::Function").filter(([id]) => /RelayFunction/.test(id));
  expect(found).toHaveLength(1);
  return (found[0] as [string, Resource])[1];
}

/** A group's egress as EC2 will hold it: its own SecurityGroupEgress plus the separate egress resources on it. */
function egressRules(template: Template, group: unknown): EgressRule[] {
  const id = (group as { "Fn::GetAtt"?: [string, string] })["Fn::GetAtt"]?.[0];
  const own =
    id === undefined
      ? []
      : ((template.toJSON().Resources[id] as Resource).Properties?.SecurityGroupEgress ?? []);
  const separate = resources(template, "AWS::EC2::SecurityGroupEgress")
    .filter(([, rule]) => JSON.stringify(rule.Properties?.GroupId) === JSON.stringify(group))
    .map(([, rule]) => rule.Properties);
  return [...(own as EgressRule[]), ...(separate as EgressRule[])];
}

type Statement = {
  Effect: string;
  Action: string | string[];
  Condition?: Record<string, Record<string, unknown>>;
};

/** The payload bucket's policy statements. */
function bucketStatements(template: Template): Statement[] {
  const policies = resources(template, "AWS::S3::BucketPolicy");
  expect(policies).toHaveLength(1);
  const document = (policies[0] as [string, Resource])[1].Properties?.PolicyDocument;
  return (document as { Statement: Statement[] }).Statement;
}

/** The role of a template's role resource, as the bucket policy names it: `{"Fn::GetAtt": [id, "Arn"]}`. */
function roleArn(template: Template, id: RegExp): unknown {
  const found = resources(template, "AWS::IAM::Role").filter(([logical]) => id.test(logical));
  expect(found, String(id)).toHaveLength(1);
  return { "Fn::GetAtt": [(found[0] as [string, Resource])[0], "Arn"] };
}

/**
 * Whether the bucket policy denies `action` on a payload object to a principal of this account with that role
 * ARN, whatever its identity policy allows: one Deny that applies is enough (IAM's evaluation logic). A Deny with
 * `ArnNotLike` on `aws:PrincipalArn` applies unless the ARN is among its values.
 */
function deniedTo(statements: Statement[], principalArn: unknown, action: string): boolean {
  return statements.some((statement) => {
    if (statement.Effect !== "Deny" || ![statement.Action].flat().includes(action)) return false;
    const condition = statement.Condition ?? {};
    if (condition.Bool !== undefined) return false; // the TLS-only Deny: not for a TLS request
    const exempt = [condition.ArnNotLike?.["aws:PrincipalArn"] ?? []]
      .flat()
      .map((arn) => JSON.stringify(arn));
    return !exempt.includes(JSON.stringify(principalArn));
  });
}

/** Issue 31: OutboxRelay's opt-in `largePayloads` (the claim check's bucket, grants and endpoint). */
describe("OutboxRelay largePayloads", () => {
  const withConsumer = () =>
    outboxStack(() => ({
      largePayloads: { thresholdBytes: 200_000 },
      consumer: { entry: "test/fixtures/consumerHandler.ts" },
    }));

  it("creates nothing for S3 without it", () => {
    const { template } = outboxStack();
    expect(resources(template, "AWS::S3::Bucket")).toEqual([]);
    expect(JSON.stringify(template.toJSON())).not.toContain("OUTBOX_PAYLOAD_BUCKET");
  });

  it("creates an encrypted, TLS-only, private bucket whose objects outlive their messages (35 days)", () => {
    const { template } = withConsumer();
    expect(PAYLOAD_EXPIRATION_DAYS).toBe(14 + 14 + 7);
    template.hasResourceProperties("AWS::S3::Bucket", {
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } }],
      },
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      LifecycleConfiguration: {
        Rules: Match.arrayWith([
          Match.objectLike({ ExpirationInDays: 35, Prefix: "outbox-payloads/", Status: "Enabled" }),
        ]),
      },
    });
    template.hasResourceProperties("AWS::S3::BucketPolicy", {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: "Deny", Condition: { Bool: { "aws:SecureTransport": "false" } } }),
        ]),
      },
    });
  });

  it("encrypts the bucket with a given customer key (SSE-KMS, Bucket Key): the relay may encrypt, the consumer decrypt", () => {
    // Issue 40, item 8: a user who encrypts queues with a customer key to limit who reads events gets payloads
    // that only the key's users can read too.
    const { template } = outboxStack((stack) => ({
      largePayloads: { encryptionKey: new kms.Key(stack, "PayloadKey", { enableKeyRotation: true }) },
      consumer: { entry: "test/fixtures/consumerHandler.ts" },
    }));
    const keyArn = { "Fn::GetAtt": [Match.stringLikeRegexp("^PayloadKey"), "Arn"] };
    template.hasResourceProperties("AWS::S3::Bucket", {
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [
          {
            ServerSideEncryptionByDefault: { SSEAlgorithm: "aws:kms", KMSMasterKeyID: keyArn },
            BucketKeyEnabled: true,
          },
        ],
      },
    });
    // The key trusts the account's IAM (CDK's default key policy): the grants are the roles' own statements.
    const keyStatements = identityStatements(template).filter(({ statement }) =>
      JSON.stringify(statement.Resource).includes("PayloadKey"),
    );
    const actionsOf = (source: RegExp) =>
      keyStatements
        .filter((one) => source.test(one.source))
        .flatMap(({ statement }) => [statement.Action].flat());
    expect(actionsOf(/^OutboxRelay/)).toEqual(expect.arrayContaining(["kms:GenerateDataKey*"]));
    expect(actionsOf(/^OutboxRelay/)).not.toContain("kms:Decrypt");
    expect(actionsOf(/Consumer/)).toEqual(["kms:Decrypt"]);
  });

  it("lets only the relay's role write and delete payloads, and only it and the consumer's read them", () => {
    // Issue 40, item 8: without a Deny in the bucket's policy, any role of the account whose identity policy
    // allows s3:GetObject broadly reads every payload, whatever the queue's policy and key allow.
    const { template } = withConsumer();
    const statements = bucketStatements(template);
    const relay = roleArn(template, /^OutboxRelayRole/);
    const consumer = roleArn(template, /^OutboxConsumerRole/);
    const admin = "arn:aws:iam::123456789012:role/Admin";
    expect(deniedTo(statements, relay, "s3:PutObject")).toBe(false);
    expect(deniedTo(statements, consumer, "s3:GetObject")).toBe(false);
    expect(deniedTo(statements, consumer, "s3:PutObject")).toBe(true);
    expect(deniedTo(statements, consumer, "s3:DeleteObject")).toBe(true);
    for (const action of ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]) {
      expect(deniedTo(statements, admin, action), action).toBe(true);
    }
    // The purge, the migrations and the relay's other roles are not among them.
    for (const other of [/^OutboxPurgeRole/, /^OutboxMigrateRole/]) {
      if (resources(template, "AWS::IAM::Role").some(([id]) => other.test(id))) {
        expect(deniedTo(statements, roleArn(template, other), "s3:GetObject")).toBe(true);
      }
    }
    // Still TLS only.
    expect(statements).toContainEqual(
      expect.objectContaining({ Effect: "Deny", Condition: { Bool: { "aws:SecureTransport": "false" } } }),
    );
  });

  it("lets in a reader granted with grantPayloadRead and an OutboxConsumer made after the relay", () => {
    const stack = new Stack(newApp(), "Readers");
    const { vpc, secret } = importedNetwork(stack);
    const relay = new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      largePayloads: {},
    });
    const reader = new iam.Role(stack, "JavaReader", {
      assumedBy: new iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
    });
    relay.grantPayloadRead(reader);
    const bus = new sqs.Queue(stack, "BusQueue", { visibilityTimeout: Duration.minutes(3) });
    new OutboxConsumer(stack, "Billing", {
      queue: bus,
      entry: "test/fixtures/consumerHandler.ts",
      payloadBucket: { bucket: relay.payloadBucket as s3.IBucket, prefix: "outbox-payloads/" },
    });
    const template = Template.fromStack(stack);
    const statements = bucketStatements(template);
    for (const role of [/^JavaReader/, /^BillingRole/]) {
      const arn = roleArn(template, role);
      expect(deniedTo(statements, arn, "s3:GetObject"), String(role)).toBe(false);
      expect(deniedTo(statements, arn, "s3:PutObject"), String(role)).toBe(true);
    }
    // Its identity policy has the read: both are needed in the end.
    const readerReads = identityStatements(template).filter(
      ({ source, statement }) => /^JavaReader/.test(source) && statement.Action === "s3:GetObject",
    );
    expect(readerReads).toHaveLength(1);
    // The test's own bus queue aside (no DLQ, no TLS policy: not the construct's).
    expect(nagFindings(stack).filter((finding) => !finding.includes("/BusQueue/"))).toEqual([]);
  });

  it("refuses a reader it cannot name (another stack's role, no largePayloads, no role) with a clear error", () => {
    const app = newApp();
    const stack = new Stack(app, "Relay");
    const { vpc, secret } = importedNetwork(stack);
    const relay = new OutboxRelay(stack, "Outbox", {
      database: { secret, vpc },
      migrations: false,
      largePayloads: {},
    });
    const other = new Stack(app, "Other");
    const role = new iam.Role(other, "Reader", { assumedBy: new iam.AccountRootPrincipal() });
    expect(() => relay.grantPayloadRead(role)).toThrow(/in another stack.*iam\.Role\.fromRoleArn/);
    const imported = iam.Role.fromRoleArn(stack, "Imported", "arn:aws:iam::123456789012:role/reader");
    relay.grantPayloadRead(imported);
    expect(
      deniedTo(
        bucketStatements(Template.fromStack(stack)),
        "arn:aws:iam::123456789012:role/reader",
        "s3:GetObject",
      ),
    ).toBe(false);
    expect(() => outboxStack().relay.grantPayloadRead(imported)).toThrow(/without largePayloads/);
    expect(() => relay.grantPayloadRead(new iam.AnyPrincipal())).toThrow(/must be an IAM role/);
  });

  it("adds no policy to a given bucket (its policies are its owner's)", () => {
    const { stack, template } = outboxStack((stack) => ({
      largePayloads: { bucket: s3.Bucket.fromBucketName(stack, "Given", "payloads") },
      consumer: { entry: "test/fixtures/consumerHandler.ts" },
    }));
    expect(resources(template, "AWS::S3::BucketPolicy")).toEqual([]);
    // Synthesizes, and its grants' object wildcard is acknowledged as cdk-nag prints an imported bucket's ARN.
    expect(nagFindings(stack).filter((finding) => /IAM5/.test(finding))).toEqual([]);
  });

  it("refuses encryptionKey with a given bucket, whose encryption is its own", () => {
    expect(() =>
      outboxStack((stack) => ({
        largePayloads: {
          bucket: s3.Bucket.fromBucketName(stack, "Given", "payloads"),
          encryptionKey: new kms.Key(stack, "PayloadKey"),
        },
      })),
    ).toThrow(/largePayloads\.encryptionKey is for the bucket the construct creates/);
  });

  it("gives the relay its settings and s3:PutObject under the prefix, the consumer s3:GetObject, nothing more", () => {
    const { template } = withConsumer();
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          OUTBOX_PAYLOAD_BUCKET: Match.anyValue(),
          OUTBOX_PAYLOAD_PREFIX: "outbox-payloads/",
          OUTBOX_PAYLOAD_THRESHOLD_BYTES: "200000",
        }),
      },
      // The payloads need 448 MB for the rounds' budgets + 6 x 64 MiB for one payload loaded past them = 832 MB
      // (bench: 483 MiB peak), more than the default throughput target's 384 MB.
      MemorySize: 832,
    });
    const s3Statements = identityStatements(template).filter(({ statement }) =>
      JSON.stringify(statement.Action).includes("s3:"),
    );
    expect(s3Statements.map(({ statement }) => statement.Action).sort()).toEqual([
      "s3:GetObject",
      "s3:PutObject",
    ]);
    for (const { statement } of s3Statements) {
      expect(JSON.stringify(statement.Resource)).toContain("/outbox-payloads/*");
    }
  });

  it("adds the S3 gateway endpoint when the Lambdas reach AWS through interface endpoints", () => {
    const stack = new Stack(newApp(), "Endpoints");
    const { vpc, secret } = importedNetwork(stack);
    const sqsEndpoint = new ec2.InterfaceVpcEndpoint(stack, "SqsEndpoint", {
      vpc,
      service: ec2.InterfaceVpcEndpointAwsService.SQS,
      open: false,
    });
    new OutboxRelay(stack, "Outbox", {
      // An imported VPC: its route tables get an S3 gateway endpoint only when asked (endpoints.test.ts).
      database: { secret, vpc, vpcEndpoints: [sqsEndpoint], createEndpoints: "functionsOnly" },
      migrations: false,
      largePayloads: {},
    });
    const template = Template.fromStack(stack);
    template.hasResourceProperties("AWS::EC2::VPCEndpoint", {
      VpcEndpointType: "Gateway",
      RouteTableIds: ["rtb-0123456789abcdef0"],
    });
    expect(JSON.stringify(resources(template, "AWS::EC2::VPCEndpoint"))).toMatch(/\.s3"/);
    // Without interface endpoints (a NAT route) in an imported VPC, no gateway endpoint; NAT carries S3.
    expect(resources(withConsumer().template, "AWS::EC2::VPCEndpoint")).toEqual([]);
  });

  it("sizes the relay's timeouts for loading and sending one payload of maxPayloadBytes past the round's budget", () => {
    // Issue 38: 96 MiB of jsonb text at most, 80 MiB past the 16 MiB budget at 4 MiB/s: 20 s more for the load
    // and 20 s more for the publish; reserve 10 + 3 x 5 + 40 = 65 s, dwell 120 + 10 (hand-over) + 65 s, timeout
    // 195 + 10 s.
    const large = relayTiming({ scheduleSeconds: 60, maxMessageBytes: 64 * 1_048_576 });
    expect(large).toMatchObject({
      loadAllowanceMs: 20_000,
      roundReserveMs: 65_000,
      maxDurationMs: 195_000,
      timeoutSeconds: 205,
      concurrencyPerRelay: 5,
    });
    const { template } = withConsumer();
    template.hasResourceProperties("AWS::Lambda::Function", {
      Timeout: large.timeoutSeconds,
      Environment: { Variables: Match.objectLike({ RELAY_MAX_DURATION_MS: String(large.maxDurationMs) }) },
    });
    // Without largePayloads, the defaults as before.
    const defaults = relayTiming({ scheduleSeconds: 60 });
    outboxStack().template.hasResourceProperties("AWS::Lambda::Function", {
      Timeout: defaults.timeoutSeconds,
      Environment: { Variables: Match.objectLike({ RELAY_MAX_DURATION_MS: String(defaults.maxDurationMs) }) },
    });
  });

  it("leaves the relay a path to S3 on 443 in every variant (NAT, interface endpoints, endpoints + given SQS)", () => {
    const behindEndpoints = (sqsGiven: boolean) => {
      const stack = new Stack(newApp(), "Endpoints");
      const { vpc, secret } = importedNetwork(stack);
      const secrets = new ec2.InterfaceVpcEndpoint(stack, "SecretsEndpoint", {
        vpc,
        service: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
        open: false,
      });
      const sqsEndpoint = new ec2.InterfaceVpcEndpoint(stack, "SqsEndpoint", {
        vpc,
        service: ec2.InterfaceVpcEndpointAwsService.SQS,
        open: false,
      });
      new OutboxRelay(stack, "Outbox", {
        database: {
          secret,
          vpc,
          vpcEndpoints: sqsGiven ? [secrets, sqsEndpoint] : [secrets],
          ...(sqsGiven ? {} : { createEndpoints: "functionsOnly" as const }),
        },
        migrations: false,
        largePayloads: {},
      });
      return Template.fromStack(stack);
    };
    for (const [variant, template] of [
      ["NAT", withConsumer().template],
      ["endpoints", behindEndpoints(true)],
      ["endpoints, SQS created", behindEndpoints(false)],
    ] as const) {
      const relay = relayFunction(template);
      const groups = (relay.Properties as { VpcConfig: { SecurityGroupIds: unknown[] } }).VpcConfig
        .SecurityGroupIds;
      const rules = groups.flatMap((group) => egressRules(template, group));
      expect(
        rules.some(
          (rule) =>
            rule.IpProtocol === "tcp" &&
            rule.FromPort <= 443 &&
            rule.ToPort >= 443 &&
            rule.CidrIp === "0.0.0.0/0",
        ),
        `${variant}: ${JSON.stringify(rules)}`,
      ).toBe(true);
      // Still nothing else: the listed rules are HTTPS and the endpoints' groups.
      expect(
        rules.filter((rule) => rule.IpProtocol === "-1"),
        variant,
      ).toEqual([]);
    }
  });

  it("passes cdk-nag with no unacknowledged finding", () => {
    const { stack } = withConsumer();
    expect(nagFindings(stack)).toEqual([]);
  });
});
