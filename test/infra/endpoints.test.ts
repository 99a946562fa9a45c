import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as events from "aws-cdk-lib/aws-events";
import * as kinesis from "aws-cdk-lib/aws-kinesis";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import type { CreateEndpoints } from "../../infra/network.ts";
import { OutboxRelay, type OutboxRoute } from "../../infra/outboxRelay.ts";
import { newApp, type Resource, resources } from "../support/template.ts";

/**
 * Issue 40, item 3: what the construct adds to a VPC must not take a service away from the VPC's other workloads.
 * An interface endpoint with private DNS answers for its service's hostname in the whole VPC; a route table takes
 * one S3 gateway endpoint.
 */
const arn = (service: string, resource: string) => `arn:aws:${service}:eu-west-1:123456789012:${resource}`;

function routes(stack: Stack): OutboxRoute[] {
  return [
    {
      match: { aggregateType: "order" },
      destination: sqs.Queue.fromQueueArn(stack, "Orders", arn("sqs", "orders.fifo")),
    },
    {
      match: { aggregateType: "payment" },
      destination: sns.Topic.fromTopicArn(stack, "Payments", arn("sns", "payments.fifo")),
    },
    {
      match: { aggregateType: "audit" },
      destination: kinesis.Stream.fromStreamArn(stack, "Audit", arn("kinesis", "stream/audit")),
    },
    {
      match: { aggregateType: "customer" },
      destination: events.EventBus.fromEventBusArn(stack, "Bus", arn("events", "event-bus/c")),
    },
  ];
}

const SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf";

/** The construct in a VPC it did not create (the usual service's), behind a Secrets Manager and an SQS endpoint. */
function importedVpcStack(options: {
  cidr?: string;
  createEndpoints?: CreateEndpoints;
  largePayloads?: boolean;
}) {
  const stack = new Stack(newApp(), "Imported");
  const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
    vpcId: "vpc-0123456789abcdef0",
    availabilityZones: ["eu-west-1a"],
    privateSubnetIds: ["subnet-0123456789abcdef0"],
    privateSubnetRouteTableIds: ["rtb-0123456789abcdef0"],
    ...(options.cidr === undefined ? {} : { vpcCidrBlock: options.cidr }),
  });
  const given = [
    ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    ec2.InterfaceVpcEndpointAwsService.SQS,
  ].map(
    (service, index) => new ec2.InterfaceVpcEndpoint(stack, `Given${index}`, { vpc, service, open: false }),
  );
  new OutboxRelay(stack, "Outbox", {
    database: {
      secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET),
      vpc,
      vpcEndpoints: given,
      ...(options.createEndpoints === undefined ? {} : { createEndpoints: options.createEndpoints }),
    },
    routes: routes(stack),
    migrations: false,
    ...(options.largePayloads === true ? { largePayloads: {} } : {}),
  });
  return Template.fromStack(stack);
}

/** The interface endpoints the construct created (under Outbox/) with private DNS, and who their groups admit. */
function createdPrivateDnsEndpoints(template: Template) {
  const ingress = resources(template, "AWS::EC2::SecurityGroupIngress");
  const groups = template.toJSON().Resources as Record<string, Resource>;
  return resources(template, "AWS::EC2::VPCEndpoint")
    .filter(([id, endpoint]) => id.startsWith("Outbox") && endpoint.Properties?.PrivateDnsEnabled === true)
    .map(([id, endpoint]) => {
      const groupIds = (endpoint.Properties?.SecurityGroupIds ?? []) as { "Fn::GetAtt": [string, string] }[];
      const admits = groupIds.flatMap((groupId) => {
        const own = (groups[groupId["Fn::GetAtt"][0]]?.Properties?.SecurityGroupIngress ?? []) as Record<
          string,
          unknown
        >[];
        const separate = ingress
          .filter(([, rule]) => JSON.stringify(rule.Properties?.GroupId) === JSON.stringify(groupId))
          .map(([, rule]) => rule.Properties as Record<string, unknown>);
        return [...own, ...separate];
      });
      return { id, admits };
    });
}

describe("endpoints in a VPC the construct shares", () => {
  it("creates no endpoint in an imported VPC by default: a service without one fails synth, naming it", () => {
    expect(() => importedVpcStack({})).toThrow(
      /publishes to sns, and no sns endpoint is given.*routeEndpoints\.sns.*createEndpoints/s,
    );
  });

  it("opens what it creates in an imported VPC to the VPC's CIDR when asked to create (openToVpc)", () => {
    const template = importedVpcStack({ cidr: "10.20.0.0/16", createEndpoints: "openToVpc" });
    const created = createdPrivateDnsEndpoints(template);
    expect(created.map(({ id }) => id.replace(/[0-9A-F]{8}$/, "")).sort()).toEqual(
      ["OutboxEventBridgeEndpoint", "OutboxKinesisEndpoint", "OutboxSnsEndpoint"].sort(),
    );
    for (const { id, admits } of created) {
      expect(admits, id).toContainEqual(
        expect.objectContaining({ CidrIp: "10.20.0.0/16", FromPort: 443, ToPort: 443 }),
      );
    }
    // Without the CIDR, a clear error instead of CDK's.
    expect(() => importedVpcStack({ createEndpoints: "openToVpc" })).toThrow(/vpcCidrBlock/);
  });

  it("admits only the Lambdas with functionsOnly, and opens a created VPC's endpoints to its CIDR by default", () => {
    const closed = createdPrivateDnsEndpoints(importedVpcStack({ createEndpoints: "functionsOnly" }));
    expect(closed).toHaveLength(3);
    for (const { id, admits } of closed) {
      expect(
        admits.filter((rule) => rule.CidrIp !== undefined),
        id,
      ).toEqual([]);
    }
    const stack = new Stack(newApp(), "Own");
    const vpc = new ec2.Vpc(stack, "Net", { natGateways: 0, maxAzs: 2 });
    new OutboxRelay(stack, "Outbox", {
      database: {
        secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET),
        vpc,
        vpcEndpoints: [
          vpc.addInterfaceEndpoint("Secrets", {
            service: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
          }),
        ],
      },
      routes: routes(stack),
      migrations: false,
    });
    const own = createdPrivateDnsEndpoints(Template.fromStack(stack));
    expect(own).toHaveLength(4);
    for (const { id, admits } of own) {
      expect(admits, id).toContainEqual(
        expect.objectContaining({ CidrIp: { "Fn::GetAtt": [expect.stringMatching(/^Net/), "CidrBlock"] } }),
      );
    }
  });

  it("adds no S3 gateway endpoint to an imported VPC's route tables unless asked, and never a second one", () => {
    const gateways = (template: Template) =>
      resources(template, "AWS::EC2::VPCEndpoint").filter(
        ([, e]) => e.Properties?.VpcEndpointType === "Gateway",
      );
    // routeEndpoints for the routes' services, so only S3 is in question.
    expect(gateways(importedVpcStackWithRouteEndpoints())).toEqual([]);
    expect(
      gateways(importedVpcStack({ createEndpoints: "functionsOnly", largePayloads: true })),
    ).toHaveLength(1);
    // A VPC of this app that has its S3 gateway endpoint: used, not doubled (a route table takes one).
    const stack = new Stack(newApp(), "Own");
    const vpc = new ec2.Vpc(stack, "Net", {
      maxAzs: 2,
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
    });
    new OutboxRelay(stack, "Outbox", {
      database: { secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET), vpc },
      migrations: false,
      largePayloads: {},
    });
    expect(gateways(Template.fromStack(stack))).toHaveLength(1);
    // A VPC of this app without one, NAT and no interface endpoints: payloads take the free gateway endpoint, not
    // NAT at $0.045/GB each way.
    const natStack = new Stack(newApp(), "Nat");
    const natVpc = new ec2.Vpc(natStack, "Net", { maxAzs: 2 });
    new OutboxRelay(natStack, "Outbox", {
      database: {
        secret: secretsmanager.Secret.fromSecretCompleteArn(natStack, "Secret", SECRET),
        vpc: natVpc,
      },
      migrations: false,
      largePayloads: {},
    });
    expect(gateways(Template.fromStack(natStack))).toHaveLength(1);
  });
});

function importedVpcStackWithRouteEndpoints(): Template {
  const stack = new Stack(newApp(), "Imported");
  const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
    vpcId: "vpc-0123456789abcdef0",
    availabilityZones: ["eu-west-1a"],
    privateSubnetIds: ["subnet-0123456789abcdef0"],
    privateSubnetRouteTableIds: ["rtb-0123456789abcdef0"],
  });
  const endpoint = (id: string, service: ec2.InterfaceVpcEndpointAwsService) =>
    new ec2.InterfaceVpcEndpoint(stack, id, { vpc, service, open: false });
  new OutboxRelay(stack, "Outbox", {
    database: {
      secret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Secret", SECRET),
      vpc,
      vpcEndpoints: [
        endpoint("SecretsEndpoint", ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER),
        endpoint("SqsEndpoint", ec2.InterfaceVpcEndpointAwsService.SQS),
      ],
      routeEndpoints: {
        sns: endpoint("SnsEndpoint", ec2.InterfaceVpcEndpointAwsService.SNS),
        kinesis: endpoint("KinesisEndpoint", ec2.InterfaceVpcEndpointAwsService.KINESIS_STREAMS),
        events: endpoint("EventsEndpoint", ec2.InterfaceVpcEndpointAwsService.EVENTBRIDGE),
      },
    },
    routes: routes(stack),
    migrations: false,
    largePayloads: {},
  });
  return Template.fromStack(stack);
}
