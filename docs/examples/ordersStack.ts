import { Stack, type StackProps } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { OutboxRelay } from "aws-outbox-relay/cdk";
import type { Construct } from "constructs";

/** Your stack: the VPC, the Aurora cluster and its secret, the queue and the alarm topic already exist. */
export class OrdersStack extends Stack {
  readonly outbox: OutboxRelay;

  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);

    const vpc = ec2.Vpc.fromVpcAttributes(this, "Vpc", {
      vpcId: "vpc-0a1b2c3d4e5f67890",
      availabilityZones: ["eu-west-1a", "eu-west-1b"],
      privateSubnetIds: ["subnet-0a1b2c3d4e5f67890", "subnet-0b1c2d3e4f5a67890"],
      privateSubnetRouteTableIds: ["rtb-0a1b2c3d4e5f67890", "rtb-0b1c2d3e4f5a67890"],
    });
    const cluster = rds.DatabaseCluster.fromDatabaseClusterAttributes(this, "Database", {
      clusterIdentifier: "orders",
      clusterEndpointAddress: "orders.cluster-c1a2b3c4d5e6.eu-west-1.rds.amazonaws.com",
      port: 5432,
      securityGroups: [
        ec2.SecurityGroup.fromSecurityGroupId(this, "DatabaseSecurityGroup", "sg-0a1b2c3d4e5f67890"),
      ],
    });
    const secret = secretsmanager.Secret.fromSecretCompleteArn(
      this,
      "DatabaseSecret",
      "arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders/database-AbCdEf",
    );
    const queue = sqs.Queue.fromQueueAttributes(this, "OrderEvents", {
      queueArn: "arn:aws:sqs:eu-west-1:123456789012:order-events.fifo",
      fifo: true,
    });
    const alarmTopic = sns.Topic.fromTopicArn(
      this,
      "Alarms",
      "arn:aws:sns:eu-west-1:123456789012:ops-alarms",
    );

    this.outbox = new OutboxRelay(this, "Outbox", {
      database: { vpc, cluster, secret, databaseName: "orders" },
      queue,
      alarms: { topic: alarmTopic },
    });
    // The service that writes orders and their events: the database's port opens to its security group.
    const ordersService = ec2.SecurityGroup.fromSecurityGroupId(
      this,
      "OrdersService",
      "sg-0c1d2e3f4a5b67890",
    );
    this.outbox.grantEnqueue(ordersService);
  }
}
