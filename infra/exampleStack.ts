import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps, Validations } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as logs from "aws-cdk-lib/aws-logs";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as subscriptions from "aws-cdk-lib/aws-sns-subscriptions";
import type { Construct, Node } from "constructs";
import { secretRotationFunctionName } from "./alarms.ts";
import type { OutboxLoginRotationProps } from "./logins.ts";
import { stackCreationSuffix } from "./naming.ts";
import { denyUnlistedEgress } from "./network.ts";
import { type OutboxDatabaseProps, OutboxRelay } from "./outboxRelay.ts";

/** An existing database, named by context values (no account lookups: synth stays offline). */
export interface ExistingDatabase {
  /** Complete secret ARN (with its 6-character suffix), so the IAM policy names exactly that secret. */
  secretArn: string;
  vpcId: string;
  /** Subnets for the Lambdas: private, with a route to SQS and Secrets Manager (NAT or VPC endpoints). */
  subnetIds: string[];
  /** The database's security group; the Lambdas' group is allowed into it on `port`. */
  securityGroupId: string;
  port: number;
  databaseName?: string;
}

export interface OutboxExampleStackProps extends StackProps {
  /** Use this database instead of creating a VPC and an Aurora cluster. */
  existingDatabase?: ExistingDatabase;
  /** Subscribe this address to the alarm topic. */
  alarmEmail?: string;
  /**
   * Keep the created cluster and its secret when CloudFormation would delete them (stack deletion, removal or
   * replacement), except when the stack operation that created them fails and rolls back (DeletionPolicy
   * RetainExceptOnCreate). Default true; false deletes them with the stack, without a final snapshot: for
   * throw-away stacks.
   */
  deletionProtection?: boolean;
  /**
   * RDS's own deletion protection on the created cluster (default false). Not on at the first deploy: a create
   * that fails after the cluster exists must roll back, and CloudFormation cannot delete a protected cluster
   * (ROLLBACK_FAILED, manual cleanup). Turn it on with a later deploy, once the stack exists (docs/deploy.md).
   */
  clusterDeletionProtection?: boolean;
  /**
   * Rotate the created cluster's secret monthly (default true), with AWS's single-user rotation function from
   * the Serverless Application Repository: `cdk deploy` passes the CAPABILITY_AUTO_EXPAND it needs, other tools
   * must; where that application is not available (docs/deploy.md), pass false and rotate otherwise.
   */
  secretRotation?: boolean;
  /** Run the migrations at deploy time (default true). */
  migrations?: boolean;
  /**
   * Reserve the relay's and the purge's concurrency (default false: an account with the default quota of 10,
   * as new accounts have, cannot reserve any).
   */
  reserveConcurrency?: boolean;
}

/** Reads the example's context values (`cdk deploy -c key=value`, or cdk.json's "context"). */
export function examplePropsFromContext(node: Node): OutboxExampleStackProps {
  const text = (key: string): string | undefined => {
    const value: unknown = node.tryGetContext(key);
    return value === undefined || value === null || String(value).trim() === ""
      ? undefined
      : String(value).trim();
  };
  const flag = (key: string): boolean | undefined => {
    const value = text(key);
    if (value === undefined) return undefined;
    if (value === "true" || value === "false") return value === "true";
    throw new Error(`context ${key} must be true or false, got ${JSON.stringify(value)}`);
  };
  const required = (key: string): string => {
    const value = text(key);
    if (value === undefined) throw new Error(`context ${key} is required when databaseSecretArn is set`);
    return value;
  };

  const props: OutboxExampleStackProps = {};
  const secretArn = text("databaseSecretArn");
  if (secretArn !== undefined) {
    const port = Number(text("databasePort") ?? "5432");
    if (!Number.isInteger(port) || port < 1 || port > 65_535)
      throw new Error("context databasePort must be a port");
    const databaseName = text("databaseName");
    props.existingDatabase = {
      secretArn,
      vpcId: required("vpcId"),
      subnetIds: required("subnetIds")
        .split(",")
        .map((id) => id.trim())
        .filter((id) => id !== ""),
      securityGroupId: required("databaseSecurityGroupId"),
      port,
      ...(databaseName === undefined ? {} : { databaseName }),
    };
  }
  const alarmEmail = text("alarmEmail");
  if (alarmEmail !== undefined) props.alarmEmail = alarmEmail;
  const deletionProtection = flag("deletionProtection");
  if (deletionProtection !== undefined) props.deletionProtection = deletionProtection;
  const clusterDeletionProtection = flag("clusterDeletionProtection");
  if (clusterDeletionProtection !== undefined) props.clusterDeletionProtection = clusterDeletionProtection;
  const secretRotation = flag("secretRotation");
  if (secretRotation !== undefined) props.secretRotation = secretRotation;
  const migrations = flag("migrations");
  if (migrations !== undefined) props.migrations = migrations;
  const reserveConcurrency = flag("reserveConcurrency");
  if (reserveConcurrency !== undefined) props.reserveConcurrency = reserveConcurrency;
  return props;
}

/**
 * The example deployment: a VPC without internet access, an Aurora PostgreSQL Serverless v2 cluster with a
 * generated, rotated secret, and the outbox relay wired to it; or the relay alone against an existing database.
 */
export class OutboxExampleStack extends Stack {
  readonly outbox: OutboxRelay;
  readonly cluster?: rds.DatabaseCluster;

  constructor(scope: Construct, id: string, props: OutboxExampleStackProps = {}) {
    super(scope, id, props);
    let database: OutboxDatabaseProps;
    if (props.existingDatabase === undefined) {
      const created = this.#createDatabase(props);
      this.cluster = created.cluster;
      database = created.database;
    } else {
      database = this.#existingDatabase(props.existingDatabase);
    }

    this.outbox = new OutboxRelay(this, "Outbox", {
      database,
      // Retained by default (it may hold undelivered events), so it must not have the same name in the next stack
      // of this name: the stack's creation suffix makes it new each time (naming.ts). 55 + 1 + 8 + 12 = 76 <= 80.
      queueName: `${this.stackName.slice(0, 55)}-${stackCreationSuffix()}-outbox.fifo`,
      ...(props.migrations === undefined ? {} : { migrations: props.migrations }),
      ...(props.reserveConcurrency === true
        ? { relay: { reservedConcurrency: true }, purge: { reservedConcurrency: true } }
        : {}),
      alarms: { createTopic: true },
    });
    if (props.alarmEmail !== undefined && this.outbox.alarmTopic !== undefined) {
      this.outbox.alarmTopic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
    }

    if (this.outbox.queue !== undefined) {
      new CfnOutput(this, "QueueUrl", { value: this.outbox.queue.queueUrl });
      new CfnOutput(this, "QueueArn", { value: this.outbox.queue.queueArn });
    }
    if (this.outbox.consumerDeadLetterQueue !== undefined) {
      new CfnOutput(this, "ConsumerDeadLetterQueueUrl", {
        value: this.outbox.consumerDeadLetterQueue.queueUrl,
      });
    }
    new CfnOutput(this, "RelayFunctionName", { value: this.outbox.relayFunction.functionName });
    new CfnOutput(this, "PurgeFunctionName", { value: this.outbox.purgeFunction.functionName });
    if (this.outbox.alarmTopic !== undefined) {
      new CfnOutput(this, "AlarmTopicArn", { value: this.outbox.alarmTopic.topicArn });
    }
    new CfnOutput(this, "DatabaseSecretArn", { value: this.outbox.databaseSecret.secretArn });
    if (this.cluster !== undefined) {
      new CfnOutput(this, "DatabaseEndpoint", { value: this.cluster.clusterEndpoint.socketAddress });
    }
  }

  #createDatabase(props: OutboxExampleStackProps): {
    cluster: rds.DatabaseCluster;
    database: OutboxDatabaseProps;
  } {
    // Isolated subnets only: no internet gateway, no NAT. The Lambdas reach AWS through the two interface
    // endpoints below (~4 x $0.01/hour for 2 AZs, less than one NAT gateway) and the database directly.
    const vpc = new ec2.Vpc(this, "Vpc", {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: "data", subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 24 }],
    });
    const flowLogs = new logs.LogGroup(this, "VpcFlowLogs", {
      retention: logs.RetentionDays.ONE_MONTH,
      // Kept as evidence, except when the deploy that created it rolls back.
      removalPolicy: RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
    });
    vpc.addFlowLog("FlowLog", {
      destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs),
      // Rejected traffic only: what an investigation needs (blocked connections), at a fraction of the volume.
      trafficType: ec2.FlowLogTrafficType.REJECT,
    });
    const subnets: ec2.SubnetSelection = { subnetType: ec2.SubnetType.PRIVATE_ISOLATED };
    // `open: false`: only the security groups allowed in below (the outbox Lambdas, the rotation Lambda) may
    // use the endpoints, not everything in the VPC's CIDR.
    const secretsEndpoint = vpc.addInterfaceEndpoint("SecretsManagerEndpoint", {
      service: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
      subnets,
      open: false,
    });
    const sqsEndpoint = vpc.addInterfaceEndpoint("SqsEndpoint", {
      service: ec2.InterfaceVpcEndpointAwsService.SQS,
      subnets,
      open: false,
    });

    const deletionProtection = props.deletionProtection ?? true;
    // Retained when CloudFormation deletes or replaces them, deleted when their own create rolls back
    // (RetainExceptOnCreate): a failed first deploy cleans up after itself. RDS's DeletionProtection would block
    // that rollback (ROLLBACK_FAILED, manual cleanup), so it is off unless asked for, on a later deploy.
    const removalPolicy = deletionProtection
      ? RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
      : RemovalPolicy.DESTROY;
    const cluster = new rds.DatabaseCluster(this, "Database", {
      // No clusterIdentifier: CloudFormation names the cluster, so an update that replaces it (a new subnet group,
      // encryption, a snapshot to restore) is not blocked by a fixed name the new cluster would need too.
      // Pinned: engine upgrades are a decision, not a side effect of a CDK upgrade. The latest 17 minor this
      // aws-cdk-lib (2.276) knows; RDS stops offering old minors, so move this on with the CDK (docs/deploy.md).
      engine: rds.DatabaseClusterEngine.auroraPostgres({ version: rds.AuroraPostgresEngineVersion.VER_17_9 }),
      writer: rds.ClusterInstance.serverlessV2("Writer"),
      // 0.5 ACU floor: the relay polls every minute, so the cluster would never auto-pause anyway.
      serverlessV2MinCapacity: 0.5,
      serverlessV2MaxCapacity: 4,
      vpc,
      vpcSubnets: subnets,
      credentials: rds.Credentials.fromGeneratedSecret("outbox_admin"),
      defaultDatabaseName: "app",
      storageEncrypted: true,
      deletionProtection: props.clusterDeletionProtection ?? false,
      removalPolicy,
      backup: { retention: Duration.days(7) },
      cloudwatchLogsExports: ["postgresql"],
      // RDS creates /aws/rds/cluster/<generated id>/postgresql when it first exports, without retention; CDK's
      // log-retention function sets it (the group's name is known only once the cluster exists).
      cloudwatchLogsRetention: logs.RetentionDays.ONE_MONTH,
    });
    // The secret goes or stays with the cluster: a retained cluster whose password was deleted is locked.
    (cluster.node.findChild("Secret") as secretsmanager.Secret).applyRemovalPolicy(removalPolicy);

    let rotationFunctionName: string | undefined;
    let loginRotation: OutboxLoginRotationProps | false = false;
    if (props.secretRotation ?? true) {
      // Monthly rotation; the Lambdas re-read the secret after an authentication failure (retrying through the
      // rotation's window) and once its 15-minute TTL has passed (a new host or user too), so they follow it. The
      // first rotation runs right after the migrations (migrations.ts says why not before). The rotation Lambda
      // gets a security group of its own with listed egress: HTTPS to the Secrets Manager endpoint (which, being
      // closed, must let this group in, or every rotation times out) and the database's port.
      const rotationGroup = new ec2.SecurityGroup(this, "RotationSecurityGroup", {
        vpc,
        description: "Secrets Manager rotation Lambda of the outbox database secret",
        allowAllOutbound: false,
      });
      denyUnlistedEgress(rotationGroup);
      const rotation = cluster.addRotationSingleUser({
        automaticallyAfter: Duration.days(30),
        endpoint: secretsEndpoint,
        vpcSubnets: subnets,
        securityGroup: rotationGroup,
      });
      secretsEndpoint.connections.allowDefaultPortFrom(
        rotationGroup,
        "Secret rotation Lambda to Secrets Manager",
      );
      rotationFunctionName = secretRotationFunctionName(rotation);
      // The relay's and purge's logins rotate the same way (multi-user, the master secret as superuser), through
      // the same endpoint and security group.
      loginRotation = {
        automaticallyAfter: Duration.days(30),
        endpoint: secretsEndpoint,
        vpcSubnets: subnets,
        securityGroup: rotationGroup,
      };
      // The application's function logs to /aws/lambda/<its name>, a group Lambda creates without retention.
      new logs.LogRetention(this, "RotationLogRetention", {
        logGroupName: `/aws/lambda/${rotationFunctionName}`,
        retention: logs.RetentionDays.ONE_MONTH,
      });
    }

    if (!(props.clusterDeletionProtection ?? false)) {
      Validations.of(cluster).acknowledge({
        id: "AwsSolutions-RDS10",
        reason:
          "RDS deletion protection would make a failed first deploy unable to roll back (CloudFormation cannot " +
          "delete the cluster it created: ROLLBACK_FAILED). DeletionPolicy RetainExceptOnCreate keeps the cluster " +
          "on stack deletion or replacement instead; clusterDeletionProtection turns RDS's on in a later deploy.",
      });
    }
    if (rotationFunctionName === undefined) {
      Validations.of(cluster).acknowledge({
        id: "AwsSolutions-SMG4",
        reason:
          "Rotation turned off on purpose (secretRotation=false): a region without the rotation application, or a " +
          "deploy tool that cannot grant CAPABILITY_AUTO_EXPAND; docs/deploy.md says how to rotate otherwise.",
      });
    }
    // CDK's log-retention function (a singleton of the stack), which sets the retention of the groups RDS and the
    // rotation application's Lambda create: AWS's basic execution role, and logs:PutRetentionPolicy on "*".
    for (const child of this.node.children) {
      if (!child.node.id.startsWith("LogRetention") || child.node.tryFindChild("ServiceRole") === undefined)
        continue;
      Validations.of(child).acknowledge(
        {
          id: "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
          reason:
            "CDK's log-retention function writes its own logs with AWS's basic execution role; it runs for " +
            "seconds at deploy time and touches nothing but log groups' retention.",
        },
        {
          id: "AwsSolutions-IAM5[Resource::*]",
          reason:
            "CDK's log-retention function sets retention on log groups whose names exist only once RDS and the " +
            "rotation Lambda create them (logs:PutRetentionPolicy/DeleteRetentionPolicy on *, CDK's own policy).",
        },
      );
    }
    Validations.of(cluster).acknowledge({
      id: "AwsSolutions-RDS6",
      reason:
        "The outbox Lambdas authenticate with the Secrets Manager password (rotated monthly); IAM tokens " +
        "would need a refresh every 15 minutes in a pool built for password rotation.",
    });
    const secret = cluster.secret;
    if (secret === undefined) throw new Error("the cluster has no generated secret");
    return {
      cluster,
      database: {
        secret,
        databaseName: "app",
        vpc,
        vpcSubnets: subnets,
        // The cluster: its port opened to the Lambdas, and the relay's and purge's logins attached to it.
        cluster,
        logins: { rotation: loginRotation },
        // HTTPS only to these: the Lambdas' security group has no other way out of the VPC.
        vpcEndpoints: [secretsEndpoint, sqsEndpoint],
        // Migrations wait for the cluster, its writer and the secret attachment (readiness defaults to the
        // cluster), and run again on a new cluster.
        identity: cluster.clusterResourceIdentifier,
        ...(rotationFunctionName === undefined ? {} : { rotationFunctionName }),
      },
    };
  }

  #existingDatabase(existing: ExistingDatabase): OutboxDatabaseProps {
    if (existing.subnetIds.length === 0) throw new Error("context subnetIds must name at least one subnet");
    const vpc = ec2.Vpc.fromVpcAttributes(this, "Vpc", {
      vpcId: existing.vpcId,
      // fromVpcAttributes wants one zone per subnet list entry, but the Lambdas get explicit subnets below and
      // nothing else reads the zones, so their names need not be known (no lookup, no account).
      availabilityZones: existing.subnetIds.map(() => ""),
    });
    const subnets = existing.subnetIds.map((id, index) => {
      const subnet = ec2.Subnet.fromSubnetId(this, `Subnet${index}`, id);
      Validations.of(subnet).acknowledge({
        id: "Annotation::@aws-cdk/aws-ec2:noSubnetRouteTableId",
        reason: "Only the subnet id is used (Lambda VPC configuration); nothing reads the route table.",
      });
      return subnet;
    });
    const databaseGroup = ec2.SecurityGroup.fromSecurityGroupId(
      this,
      "DatabaseSecurityGroup",
      existing.securityGroupId,
    );
    return {
      secret: secretsmanager.Secret.fromSecretCompleteArn(this, "DatabaseSecret", existing.secretArn),
      ...(existing.databaseName === undefined ? {} : { databaseName: existing.databaseName }),
      vpc,
      vpcSubnets: { subnets },
      connections: new ec2.Connections({
        securityGroups: [databaseGroup],
        defaultPort: ec2.Port.tcp(existing.port),
      }),
    };
  }
}
