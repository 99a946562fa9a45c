import { createHash } from "node:crypto";
import { type Duration, RemovalPolicy, Validations } from "aws-cdk-lib";
import type * as ec2 from "aws-cdk-lib/aws-ec2";
import * as logs from "aws-cdk-lib/aws-logs";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type { Construct, IDependable } from "constructs";
import { outboxNames } from "../functions/shared/outbox/names.ts";
import { secretRotationFunctionName } from "./alarms.ts";

/** The multi-user rotation of the relay's and purge's logins. */
export interface OutboxLoginRotationProps {
  /** Default 30 days, Secrets Manager's. */
  readonly automaticallyAfter?: Duration;
  /** The Secrets Manager interface endpoint the rotation Lambda calls (a VPC without NAT). */
  readonly endpoint?: ec2.IInterfaceVpcEndpoint;
  /** The rotation Lambda's security group; default one created by CDK, let into the database's port. */
  readonly securityGroup?: ec2.ISecurityGroup;
  readonly vpcSubnets?: ec2.SubnetSelection;
}

export interface OutboxLoginsProps {
  /** Rotate each login with AWS's multi-user rotation for PostgreSQL, the master secret its superuser. Default on. */
  readonly rotation?: false | OutboxLoginRotationProps;
}

export interface LoginSecrets {
  relay: secretsmanager.ISecret;
  purge: secretsmanager.ISecret;
  /** The logins' rotation schedules: each must wait for the migrations resource, which creates the logins. */
  schedules: IDependable[];
  /** The rotation Lambdas' names (AWS's application names them after the rotation construct): their alarm. */
  rotationFunctionNames: string[];
}

/**
 * One generated secret per job (RDS format once attached to the database: username, password, host, port,
 * dbname, engine, and `masterarn` for the multi-user rotation), encrypted with the master secret's key if it has
 * one. The login itself is made by the migrations custom resource (functions/shared/db/logins.ts), which grants
 * it the outbox's role. The user name is unique per construct in the account (roles belong to the cluster) and
 * leaves 6 bytes of Postgres's 63 for the rotation's `_clone`.
 */
export function loginSecrets(
  scope: Construct,
  props: {
    master: secretsmanager.ISecret;
    target: rds.IDatabaseCluster | rds.IDatabaseInstance;
    vpc: ec2.IVpc;
    table: string;
    rotation: false | OutboxLoginRotationProps;
    logRetention: logs.RetentionDays;
  },
): LoginSecrets {
  const prefix = outboxNames({ table: props.table }).relatedName("");
  const tag = createHash("sha256").update(scope.node.path).digest("hex").slice(0, 8);
  const schedules: IDependable[] = [];
  const rotationFunctionNames: string[] = [];
  const login = (job: "relay" | "purge") => {
    const id = job === "relay" ? "RelayLogin" : "PurgeLogin";
    const secret = new rds.DatabaseSecret(scope, `${id}Secret`, {
      username: `${prefix}${job}_${tag}`,
      masterSecret: props.master,
      ...(props.master.encryptionKey === undefined ? {} : { encryptionKey: props.master.encryptionKey }),
    });
    const attached = secret.attach(props.target);
    if (props.rotation === false) {
      Validations.of(secret).acknowledge({
        id: "AwsSolutions-SMG4",
        reason:
          "The login's rotation was turned off (database.logins.rotation: false) by the stack's author.",
      });
    } else {
      const rotation = props.rotation;
      const rotationConstruct = new secretsmanager.SecretRotation(scope, `${id}Rotation`, {
        application: secretsmanager.SecretRotationApplication.POSTGRES_ROTATION_MULTI_USER,
        secret: attached,
        masterSecret: props.master,
        target: props.target,
        vpc: props.vpc,
        // The same characters RDS leaves out of generated passwords, as addRotationMultiUser passes.
        excludeCharacters: " %+~`#$&*()|[]{}:;<>?!'/@\"\\",
        ...(rotation.vpcSubnets === undefined ? {} : { vpcSubnets: rotation.vpcSubnets }),
        ...(rotation.endpoint === undefined ? {} : { endpoint: rotation.endpoint }),
        ...(rotation.securityGroup === undefined ? {} : { securityGroup: rotation.securityGroup }),
        ...(rotation.automaticallyAfter === undefined
          ? {}
          : { automaticallyAfter: rotation.automaticallyAfter }),
      });
      // The application's Lambda would log to /aws/lambda/<its name>, a group Lambda creates on its first run
      // with no retention. Made here first, with retention, and every schedule (whose creation runs the first
      // rotation) waits for it. Deleted with the stack, unlike the relay's logs: it holds rotation steps, not
      // evidence about events, and a retained group of this fixed name would make creating the stack again fail
      // with "already exists".
      const functionName = secretRotationFunctionName(rotationConstruct);
      const group = new logs.LogGroup(scope, `${id}RotationLogs`, {
        logGroupName: `/aws/lambda/${functionName}`,
        retention: props.logRetention,
        removalPolicy: RemovalPolicy.DESTROY,
      });
      rotationFunctionNames.push(functionName);
      for (const child of secret.node.findAll()) {
        if (!(child instanceof secretsmanager.CfnRotationSchedule)) continue;
        child.node.addDependency(group);
        schedules.push(child);
      }
    }
    return attached;
  };
  return { relay: login("relay"), purge: login("purge"), schedules, rotationFunctionNames };
}
