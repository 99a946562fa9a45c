import { Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import { describe, expect, it } from "vitest";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { PAYLOAD_EXPIRATION_DAYS } from "../../infra/payloadBucket.ts";
import {
  identityStatements,
  importedNetwork,
  nagFindings,
  newApp,
  outboxStack,
  resources,
} from "../support/template.ts";

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
      database: { secret, vpc, vpcEndpoints: [sqsEndpoint] },
      migrations: false,
      largePayloads: {},
    });
    const template = Template.fromStack(stack);
    template.hasResourceProperties("AWS::EC2::VPCEndpoint", {
      VpcEndpointType: "Gateway",
      RouteTableIds: ["rtb-0123456789abcdef0"],
    });
    expect(JSON.stringify(resources(template, "AWS::EC2::VPCEndpoint"))).toMatch(/\.s3"/);
    // Without interface endpoints (a NAT route), no gateway endpoint.
    expect(resources(withConsumer().template, "AWS::EC2::VPCEndpoint")).toEqual([]);
  });

  it("passes cdk-nag with no unacknowledged finding", () => {
    const { stack } = withConsumer();
    expect(nagFindings(stack)).toEqual([]);
  });
});
