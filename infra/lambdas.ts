import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Duration, type RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import type * as ec2 from "aws-cdk-lib/aws-ec2";
import * as iam from "aws-cdk-lib/aws-iam";
import * as kms from "aws-cdk-lib/aws-kms";
import * as lambda from "aws-cdk-lib/aws-lambda";
import * as nodejs from "aws-cdk-lib/aws-lambda-nodejs";
import * as logs from "aws-cdk-lib/aws-logs";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type { Construct } from "constructs";

/** The repository root: entries, lock file and migrations are found from here, whatever the working directory. */
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
  secret.encryptionKey?.grantDecrypt(
    new kms.ViaServicePrincipal(`secretsmanager.${Stack.of(scope).region}.amazonaws.com`, role),
  );
}

export interface OutboxFunctionOptions {
  entry: string;
  description: string;
  role: iam.Role;
  logGroup: logs.LogGroup;
  timeout: Duration;
  memorySize: number;
  environment: Record<string, string>;
  reservedConcurrency?: number | undefined;
  /** A folder copied beside the bundle as `migrations/` (the migrate handler's defaultMigrationsDir()). */
  copyMigrationsFrom?: string;
}

/** One of the construct's Lambdas: Node 24 on Graviton, in the VPC, bundled by the local esbuild. */
export function outboxFunction(
  scope: Construct,
  name: string,
  placement: FunctionPlacement,
  options: OutboxFunctionOptions,
): nodejs.NodejsFunction {
  const copy = options.copyMigrationsFrom;
  return new nodejs.NodejsFunction(scope, `${name}Function`, {
    entry: join(PROJECT_ROOT, options.entry),
    handler: "handler",
    projectRoot: PROJECT_ROOT,
    depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
    description: options.description,
    runtime: lambda.Runtime.NODEJS_24_X,
    // Graviton: about 20% cheaper per GB-second than x86, and nothing here is native code.
    architecture: lambda.Architecture.ARM_64,
    role: options.role,
    timeout: options.timeout,
    memorySize: options.memorySize,
    environment: {
      ...options.environment,
      // Stack traces point into the TypeScript sources instead of the minified bundle. Node 24 reads the map
      // only when an Error's stack is formatted, not at start.
      NODE_OPTIONS: "--enable-source-maps",
    },
    ...(options.reservedConcurrency === undefined
      ? {}
      : { reservedConcurrentExecutions: options.reservedConcurrency }),
    logGroup: options.logGroup,
    vpc: placement.vpc,
    ...(placement.vpcSubnets === undefined ? {} : { vpcSubnets: placement.vpcSubnets }),
    securityGroups: placement.securityGroups,
    bundling: {
      // Local esbuild from node_modules, never Docker (none runs on the build machines).
      forceDockerBundling: false,
      format: nodejs.OutputFormat.ESM,
      target: "node24",
      mainFields: ["module", "main"],
      minify: true,
      sourceMap: true,
      sourcesContent: false,
      // ESM output for CommonJS dependencies (pg): give them a `require`.
      banner:
        "import { createRequire as __outboxCreateRequire } from 'node:module'; " +
        "const require = __outboxCreateRequire(import.meta.url);",
      // The SDK is bundled at the versions package-lock.json pins rather than taken from the runtime, whose copy
      // changes under us when AWS updates it: what the tests ran is what runs. Minified and tree-shaken it adds
      // ~400 KB (the relay bundle is ~450 KB), and a bundled SDK starts no slower than the runtime's.
      bundleAwsSDK: true,
      ...(copy === undefined
        ? {}
        : {
            commandHooks: {
              beforeBundling: () => [],
              beforeInstall: () => [],
              // The outbox's own files only: migrations/inbox/ belongs to consumers' databases.
              afterBundling: (_inputDir: string, outputDir: string) => [
                `mkdir -p ${shellQuote(join(outputDir, "migrations"))}`,
                `cp ${shellQuote(copy)}/*.sql ${shellQuote(join(outputDir, "migrations"))}/`,
              ],
            },
          }),
    },
  });
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}
