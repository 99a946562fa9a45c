import { fileURLToPath } from "node:url";
import { type Duration, type RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import type * as ec2 from "aws-cdk-lib/aws-ec2";
import * as iam from "aws-cdk-lib/aws-iam";
import * as kms from "aws-cdk-lib/aws-kms";
import * as lambda from "aws-cdk-lib/aws-lambda";
import * as logs from "aws-cdk-lib/aws-logs";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type { Construct } from "constructs";
import { LAMBDA_HANDLER, type OutboxLambda, outboxLambdaCode } from "./lambdaCode.ts";

/** The repository root (in a checkout): where the tests find cdk.json. */
export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Where and how the construct's Lambdas run and log. */
export interface FunctionPlacement {
  vpc: ec2.IVpc;
  vpcSubnets?: ec2.SubnetSelection | undefined;
  securityGroups: ec2.ISecurityGroup[];
  logRetention: logs.RetentionDays;
  removalPolicy: RemovalPolicy;
}

export function logGroup(scope: Construct, id: string, placement: FunctionPlacement): logs.LogGroup {
  return new logs.LogGroup(scope, id, {
    retention: placement.logRetention,
    removalPolicy: placement.removalPolicy,
  });
}

export function logsPolicy(group: logs.ILogGroup): iam.PolicyDocument {
  return new iam.PolicyDocument({
    statements: [
      new iam.PolicyStatement({
        actions: ["logs:CreateLogStream", "logs:PutLogEvents"],
        // The log group's ARN attribute ends in ":*", which covers its streams and nothing else.
        resources: [group.logGroupArn],
      }),
    ],
  });
}

/** What a Lambda in a VPC needs to manage its network interfaces (AWSLambdaVPCAccessExecutionRole's actions). */
export function vpcNetworkInterfacesStatement(): iam.PolicyStatement {
  return new iam.PolicyStatement({
    sid: "ManageVpcNetworkInterfaces",
    actions: [
      "ec2:CreateNetworkInterface",
      "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeSubnets",
      "ec2:DeleteNetworkInterface",
      "ec2:AssignPrivateIpAddresses",
      "ec2:UnassignPrivateIpAddresses",
    ],
    // Lambda creates the function's ENIs with this role before any ENI exists, and the Describe actions support
    // no resource-level permissions: AWS's own AWSLambdaVPCAccessExecutionRole uses "*" here too.
    resources: ["*"],
  });
}

/** The cdk-nag acknowledgement that goes with vpcNetworkInterfacesStatement's "*". */
export function acknowledgeVpcNetworkInterfaces(role: iam.Role): void {
  Validations.of(role).acknowledge({
    id: "AwsSolutions-IAM5[Resource::*]",
    reason:
      "EC2 network-interface actions for a VPC Lambda: Describe* support no resource-level permissions and " +
      "Lambda manages the ENIs before their ARNs exist (same statement as AWSLambdaVPCAccessExecutionRole).",
  });
}

/**
 * An execution role written out instead of the AWS managed policies (AWSLambdaBasicExecutionRole,
 * AWSLambdaVPCAccessExecutionRole), whose log permissions cover every log group in the account.
 */
export function executionRole(
  scope: Construct,
  name: string,
  placement: FunctionPlacement,
): { role: iam.Role; logGroup: logs.LogGroup } {
  const group = logGroup(scope, `${name}Logs`, placement);
  const role = new iam.Role(scope, `${name}Role`, {
    assumedBy: new iam.ServicePrincipal("lambda.amazonaws.com"),
    description: `Outbox ${name.toLowerCase()} Lambda`,
    inlinePolicies: {
      logs: logsPolicy(group),
      vpc: new iam.PolicyDocument({ statements: [vpcNetworkInterfacesStatement()] }),
    },
  });
  acknowledgeVpcNetworkInterfaces(role);
  return { role, logGroup: group };
}

export function grantSecretRead(scope: Construct, role: iam.Role, secret: secretsmanager.ISecret): void {
  // GetSecretValue only (grantRead adds DescribeSecret, which no handler calls). A secret known only by a
  // partial ARN needs the 6-character suffix wildcard that Secrets Manager appends.
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ["secretsmanager:GetSecretValue"],
      resources: [secret.secretFullArn ?? `${secret.secretArn}-??????`],
    }),
  );
  const key = secret.encryptionKey;
  if (key === undefined) return;
  // The partition's URL suffix (amazonaws.com.cn in China), as AWS builds the service's endpoint name.
  const viaSecretsManager = `secretsmanager.${Stack.of(scope).region}.${Stack.of(scope).urlSuffix}`;
  if (key instanceof kms.Key) {
    // A key of this app: the grant goes into its key policy.
    key.grantDecrypt(new kms.ViaServicePrincipal(viaSecretsManager, role));
    return;
  }
  // An imported key has no policy CDK can add to, and a grant to a ViaServicePrincipal adds nothing to the role
  // either: the role gets the statement itself, which the key's policy admits when it delegates to IAM (AWS's
  // default key policy does). Through Secrets Manager only, as the grant above.
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ["kms:Decrypt"],
      resources: [key.keyArn],
      conditions: { StringEquals: { "kms:ViaService": viaSecretsManager } },
    }),
  );
}

export interface OutboxFunctionOptions {
  /** Which of the construct's Lambdas: its code comes from lambdaCode.ts. */
  code: OutboxLambda;
  description: string;
  role: iam.Role;
  logGroup: logs.LogGroup;
  timeout: Duration;
  memorySize: number;
  environment: Record<string, string>;
  reservedConcurrency?: number | undefined;
  /** Migrations to ship beside the migrate bundle instead of the package's (its defaultMigrationsDir()). */
  migrationsDir?: string;
}

/** One of the construct's Lambdas: Node 24 on Graviton, in the VPC, prebuilt or bundled from source. */
export function outboxFunction(
  scope: Construct,
  name: string,
  placement: FunctionPlacement,
  options: OutboxFunctionOptions,
): lambda.Function {
  return new lambda.Function(scope, `${name}Function`, {
    // Prebuilt in the package, bundled from functions/ in this repository (lambdaCode.ts).
    code: outboxLambdaCode(
      options.code,
      options.migrationsDir === undefined ? {} : { migrationsDir: options.migrationsDir },
    ),
    handler: LAMBDA_HANDLER,
    description: options.description,
    runtime: lambda.Runtime.NODEJS_24_X,
    // Graviton: about 20% cheaper per GB-second than x86, and nothing here is native code.
    architecture: lambda.Architecture.ARM_64,
    role: options.role,
    timeout: options.timeout,
    memorySize: options.memorySize,
    // No NODE_OPTIONS=--enable-source-maps: the bundles ship without maps and keep their function names instead
    // (scripts/lambdaBundles.ts), so stack traces name the real functions.
    environment: options.environment,
    ...(options.reservedConcurrency === undefined
      ? {}
      : { reservedConcurrentExecutions: options.reservedConcurrency }),
    logGroup: options.logGroup,
    vpc: placement.vpc,
    ...(placement.vpcSubnets === undefined ? {} : { vpcSubnets: placement.vpcSubnets }),
    securityGroups: placement.securityGroups,
  });
}
