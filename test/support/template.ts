import { readFileSync } from "node:fs";
import { join } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { AwsSolutionsChecks } from "cdk-nag";
import type { IConstruct } from "constructs";
import { OutboxRelay, PROJECT_ROOT } from "../../infra/outboxRelay.ts";

const CDK_CONTEXT = JSON.parse(readFileSync(join(PROJECT_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;

/** An app with the project's CDK context; bundling skipped (`aws:cdk:bundling-stacks: []`): template only. */
export function newApp(context: Record<string, unknown> = {}, outdir?: string): App {
  return new App({
    context: { ...CDK_CONTEXT, "aws:cdk:bundling-stacks": [], ...context },
    ...(outdir === undefined ? {} : { outdir }),
  });
}

export type OutboxRelayProps = ConstructorParameters<typeof OutboxRelay>[2];

/** An imported VPC and database secret, as a service that already has its database would pass them. */
export function importedNetwork(stack: Stack) {
  const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
    vpcId: "vpc-0123456789abcdef0",
    availabilityZones: ["eu-west-1a"],
    privateSubnetIds: ["subnet-0123456789abcdef0"],
    privateSubnetRouteTableIds: ["rtb-0123456789abcdef0"],
  });
  const secret = secretsmanager.Secret.fromSecretCompleteArn(
    stack,
    "Secret",
    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf",
  );
  return { vpc, secret };
}

/** The construct in a stack of its own, against an imported VPC and secret; `extra` may add resources. */
export function outboxStack(
  extra: (stack: Stack) => Partial<OutboxRelayProps> = () => ({}),
  stackProps: { name?: string; env?: { account: string; region: string } } = {},
) {
  const stack = new Stack(newApp(), stackProps.name ?? "Consumer", {
    ...(stackProps.env === undefined ? {} : { env: stackProps.env }),
  });
  const { vpc, secret } = importedNetwork(stack);
  const relay = new OutboxRelay(stack, "Outbox", {
    database: { secret, vpc },
    migrations: false,
    ...extra(stack),
  });
  return { stack, relay, template: Template.fromStack(stack) };
}

/** A template value as CloudFormation resolves it where the test knows how: pseudo parameters, joins. */
export function deployed(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const pseudo: Record<string, string> = { "AWS::URLSuffix": "amazonaws.com", "AWS::Partition": "aws" };
  const object = value as Record<string, unknown>;
  if ("Ref" in object && typeof object.Ref === "string" && object.Ref in pseudo) return pseudo[object.Ref];
  if ("Fn::Join" in object) {
    const [separator, parts] = object["Fn::Join"] as [string, unknown[]];
    return parts.map(deployed).join(separator);
  }
  return value;
}

export type Resource = { Type: string; Properties?: Record<string, unknown>; DependsOn?: string[] };

export function resources(template: Template, type: string): [string, Resource][] {
  return Object.entries(template.findResources(type) as Record<string, Resource>);
}

/** Every statement of every identity policy (inline in roles, or AWS::IAM::Policy), with where it came from. */
export function identityStatements(template: Template) {
  const statements: { source: string; statement: Record<string, unknown> }[] = [];
  for (const [id, policy] of resources(template, "AWS::IAM::Policy")) {
    const doc = policy.Properties?.PolicyDocument as { Statement: Record<string, unknown>[] };
    for (const statement of doc.Statement) statements.push({ source: id, statement });
  }
  for (const [id, role] of resources(template, "AWS::IAM::Role")) {
    for (const inline of (role.Properties?.Policies ?? []) as {
      PolicyDocument: { Statement: Record<string, unknown>[] };
    }[]) {
      for (const statement of inline.PolicyDocument.Statement) statements.push({ source: id, statement });
    }
  }
  return statements;
}

export function asArray<T>(value: T | T[]): T[] {
  return Array.isArray(value) ? value : [value];
}

/** cdk-nag's findings, with the acknowledgements honoured (`raw: false`) or ignored (`raw: true`). */
export function nagFindings(scope: IConstruct, raw = false): string[] {
  const pack = new AwsSolutionsChecks(undefined, { verbose: true });
  // The pack's acknowledgement check, switched off to see what each acknowledgement is hiding.
  if (raw) (pack as unknown as { isAcknowledged: () => boolean }).isAcknowledged = () => false;
  return pack
    .validateScope(scope)
    .violations.flatMap((v) =>
      v.violatingResources.map(
        (r) => `${v.ruleName} (${v.severity}) at ${r.constructPath}: ${v.description}`,
      ),
    );
}
