import { createHash } from "node:crypto";
import { Aspects, type Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as logs from "aws-cdk-lib/aws-logs";
import * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { type Construct, Dependable, type IDependable } from "constructs";
import { outboxNames } from "../functions/shared/outbox/names.ts";
import { secretRotationFunctionName } from "./alarms.ts";
import { isEndpointOf } from "./network.ts";

/** The multi-user rotation of the relay's and purge's logins. */
export interface OutboxLoginRotationProps {
  /** Default 30 days, Secrets Manager's. */
  readonly automaticallyAfter?: Duration;
  /**
   * The Secrets Manager interface endpoint the rotation Lambdas call (a VPC without NAT); it admits their security
   * group on 443. Default: the Secrets Manager endpoint among `database.vpcEndpoints` (one this app made), else
   * the public hostname (NAT, or an imported endpoint's private DNS: each of `vpcEndpoints` then admits them).
   */
  readonly endpoint?: ec2.IInterfaceVpcEndpoint;
  /**
   * The rotation Lambdas' security group, let into the database's port (and the endpoint's). Default: CDK's,
   * one per rotation; behind an endpoint, one created here for both.
   */
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
    /** The endpoints the relay's Lambdas reach AWS through (`database.vpcEndpoints` and those added for them). */
    vpcEndpoints: readonly ec2.IConnectable[];
  },
): LoginSecrets {
  const prefix = outboxNames({ table: props.table }).relatedName("");
  const tag = createHash("sha256").update(scope.node.path).digest("hex").slice(0, 8);
  const schedules: IDependable[] = [];
  const rotationFunctionNames: string[] = [];
  const { endpoint, admitting } =
    props.rotation === false
      ? { endpoint: undefined, admitting: [] }
      : rotationEndpoints(props.rotation, props.vpcEndpoints);
  let rotationGroup: ec2.ISecurityGroup | undefined;
  if (props.rotation !== false && admitting.length > 0) {
    // Behind a closed endpoint, whoever calls it must be let in: the rotation Lambdas' group, not only the
    // relay's, or every rotation times out in createSecret (and LoginRotationErrors pages at the first deploy).
    rotationGroup =
      props.rotation.securityGroup ??
      new ec2.SecurityGroup(scope, "LoginRotationSecurityGroup", {
        vpc: props.vpc,
        description: "Secrets Manager rotation Lambdas of the outbox relay and purge logins",
        // As CDK's own rotation group: the Lambdas reach the database and Secrets Manager, both in the VPC.
        allowAllOutbound: true,
      });
    for (const one of admitting) {
      one.connections.allowDefaultPortFrom(rotationGroup, "Login rotation Lambdas to Secrets Manager");
    }
  }
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
        ...(endpoint === undefined ? {} : { endpoint }),
        ...(rotationGroup === undefined ? {} : { securityGroup: rotationGroup }),
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
  const secrets = { relay: login("relay"), purge: login("purge") };
  afterMasterRotation(scope, props.master, schedules);
  return { ...secrets, schedules, rotationFunctionNames };
}

/**
 * The Secrets Manager endpoint the rotations call, and the endpoints that must let them in: the one given; else
 * the Secrets Manager endpoint among the relay's (one this app made); else, behind endpoints none of which can
 * be recognized (imported ones), every one of them, the rotations calling the public hostname that their private
 * DNS answers for.
 */
function rotationEndpoints(
  rotation: OutboxLoginRotationProps,
  vpcEndpoints: readonly ec2.IConnectable[],
): { endpoint?: ec2.IInterfaceVpcEndpoint; admitting: readonly ec2.IConnectable[] } {
  if (rotation.endpoint !== undefined) return { endpoint: rotation.endpoint, admitting: [rotation.endpoint] };
  const found = vpcEndpoints.find((one) =>
    isEndpointOf(one, ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER),
  ) as ec2.InterfaceVpcEndpoint | undefined;
  return found === undefined ? { admitting: vpcEndpoints } : { endpoint: found, admitting: [found] };
}

/**
 * The logins' multi-user rotations log in with the master secret's AWSCURRENT (AWS's set_secret), which is
 * briefly wrong while the master's own single-user rotation runs (its setSecret changes the password before
 * finishSecret moves AWSCURRENT). Every rotation schedule starts a rotation when created (RotateImmediately), so
 * the logins' schedules are created after the master's schedules of this stack: not at the same instant.
 * Found when the app is synthesized (an aspect), so a master rotation added after the construct counts too.
 */
function afterMasterRotation(scope: Construct, master: secretsmanager.ISecret, logins: IDependable[]): void {
  if (logins.length === 0) return;
  const stack = Stack.of(scope);
  Aspects.of(scope).add({
    visit(node) {
      if (node !== scope) return;
      const masterIds = new Set(
        [master.secretArn, master.secretFullArn].flatMap((arn) =>
          arn === undefined ? [] : [JSON.stringify(stack.resolve(arn))],
        ),
      );
      const masterSchedules = stack.node
        .findAll()
        .filter(
          (child): child is secretsmanager.CfnRotationSchedule =>
            child instanceof secretsmanager.CfnRotationSchedule &&
            masterIds.has(JSON.stringify(stack.resolve(child.secretId))),
        );
      for (const login of logins) {
        for (const root of Dependable.of(login).dependencyRoots) {
          for (const schedule of masterSchedules) root.node.addDependency(schedule);
        }
      }
    },
  });
}
