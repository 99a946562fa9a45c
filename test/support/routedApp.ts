import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as events from "aws-cdk-lib/aws-events";
import * as targets from "aws-cdk-lib/aws-events-targets";
import * as kinesis from "aws-cdk-lib/aws-kinesis";
import * as kms from "aws-cdk-lib/aws-kms";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { newApp } from "./template.ts";

/**
 * Issue 40's routed app, the construct as a service beside other workloads uses it: an imported VPC (with its
 * SQS and Secrets Manager endpoints) and Aurora cluster, a default FIFO queue and routes to a second FIFO queue,
 * an SNS FIFO topic, a KMS-encrypted Kinesis stream and a bus (with a rule delivering to the CRM's queue),
 * `largePayloads`, and `consumer` on the default queue. Its destinations are imported by ARN, so their names are
 * known at synth (the route table parses as the relay will read it).
 */
export const ROUTED_ACCOUNT = "123456789012";
const REGION = "eu-west-1";
const arn = (service: string, resource: string) =>
  `arn:aws:${service}:${REGION}:${ROUTED_ACCOUNT}:${resource}`;

export function routedApp() {
  const stack = new Stack(newApp(), "Shop", { env: { account: ROUTED_ACCOUNT, region: REGION } });
  const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
    vpcId: "vpc-0a1b2c3d4e5f67890",
    vpcCidrBlock: "10.20.0.0/16",
    availabilityZones: ["eu-west-1a", "eu-west-1b"],
    privateSubnetIds: ["subnet-0a1b2c3d4e5f67890", "subnet-0b1c2d3e4f5a67890"],
    privateSubnetRouteTableIds: ["rtb-0a1b2c3d4e5f67890", "rtb-0b1c2d3e4f5a67890"],
  });
  const endpoints = [
    ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    ec2.InterfaceVpcEndpointAwsService.SQS,
  ].map((service, index) => new ec2.InterfaceVpcEndpoint(stack, `Endpoint${index}`, { vpc, service }));
  const secret = secretsmanager.Secret.fromSecretCompleteArn(
    stack,
    "Secret",
    arn("secretsmanager", "secret:shop/database-AbCdEf"),
  );
  const cluster = rds.DatabaseCluster.fromDatabaseClusterAttributes(stack, "Database", {
    clusterIdentifier: "shop",
    clusterEndpointAddress: "shop.cluster-c1a2b3c4d5e6.eu-west-1.rds.amazonaws.com",
    port: 5432,
    securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, "DatabaseGroup", "sg-0a1b2c3d4e5f67890")],
    secret,
  });
  const bus = events.EventBus.fromEventBusArn(stack, "Customers", arn("events", "event-bus/customers"));
  const relay = new OutboxRelay(stack, "Outbox", {
    database: { cluster, vpc, vpcEndpoints: endpoints, createEndpoints: "openToVpc" },
    destination: sqs.Queue.fromQueueArn(stack, "Orders", arn("sqs", "orders.fifo")),
    relay: { maxMessageBytes: 262_144 },
    routes: [
      {
        match: { aggregateType: "shipment" },
        destination: sqs.Queue.fromQueueArn(stack, "Shipments", arn("sqs", "shipments.fifo")),
        maxMessageBytes: 262_144,
      },
      {
        match: { aggregateType: "payment" },
        destination: sns.Topic.fromTopicArn(stack, "Payments", arn("sns", "payments.fifo")),
      },
      {
        match: { aggregateType: "audit" },
        destination: kinesis.Stream.fromStreamAttributes(stack, "Audit", {
          streamArn: arn("kinesis", "stream/audit"),
          encryptionKey: kms.Key.fromKeyArn(
            stack,
            "AuditKey",
            arn("kms", "key/1234abcd-12ab-34cd-56ef-1234567890ab"),
          ),
        }),
      },
      { match: { aggregateType: "customer" }, destination: bus },
    ],
    largePayloads: {},
    consumer: { entry: "test/fixtures/consumerHandler.ts" },
    alarms: { createTopic: true },
  });
  new events.Rule(stack, "ToCrm", {
    eventBus: bus,
    eventPattern: { source: ["outbox-relay"] },
    targets: [new targets.SqsQueue(sqs.Queue.fromQueueArn(stack, "Crm", arn("sqs", "crm")))],
  });
  return { stack, relay, template: Template.fromStack(stack) };
}
