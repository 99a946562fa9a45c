import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { examplePropsFromContext, OutboxExampleStack } from "../../infra/exampleStack.ts";
import { PROJECT_ROOT } from "../../infra/outboxRelay.ts";
import { newApp } from "../support/template.ts";

/**
 * docs/deploy.md tells a reader how many resources `cdk deploy` of the example creates (CloudFormation's quota is
 * 500 per template, and a reviewer compares the number with the change set). It drifted from 89 to 107 unnoticed while
 * login secrets and alarms were added, so the numbers are read from the docs and compared with the synthesized
 * templates of both modes.
 */
const DEPLOY_DOC = readFileSync(join(PROJECT_ROOT, "docs/deploy.md"), "utf8");

/** The context of docs/deploy.md's "Example stack against an existing database" command. */
const EXISTING_DATABASE = {
  databaseSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders/db-AbCdEf",
  vpcId: "vpc-0123456789abcdef0",
  subnetIds: "subnet-0aaaaaaaaaaaaaaaa,subnet-0bbbbbbbbbbbbbbbb",
  databaseSecurityGroupId: "sg-0cccccccccccccccc",
  databaseName: "orders",
};

function exampleTemplate(context: Record<string, unknown>) {
  const app = newApp(context);
  const stack = new OutboxExampleStack(app, "Example", examplePropsFromContext(app.node));
  return Template.fromStack(stack);
}

function resourceCount(template: Template): number {
  return Object.keys(template.toJSON().Resources as Record<string, unknown>).length;
}

/** The counts in the heading "What the example creates (new-database mode, N resources; M against an existing database)". */
function documentedCounts(): { created: number; existing: number } {
  const match = /new-database mode, (\d+) resources; (\d+) against an existing database/.exec(DEPLOY_DOC);
  if (match === null)
    throw new Error('docs/deploy.md has no "What the example creates (…)" heading with counts');
  return { created: Number(match[1]), existing: Number(match[2]) };
}

describe("docs/deploy.md's resource counts of the example stack", () => {
  it("match the synthesized template in new-database mode", () => {
    expect(resourceCount(exampleTemplate({}))).toBe(documentedCounts().created);
  });

  it("match the synthesized template against an existing database", () => {
    expect(resourceCount(exampleTemplate(EXISTING_DATABASE))).toBe(documentedCounts().existing);
  });

  it("match the alarm count the table names (the construct's plus the example's rotation alarms)", () => {
    const alarms = /\| (\d+) alarms \(docs\/operations\.md#what-pages-you/.exec(DEPLOY_DOC);
    expect(alarms, "the table's monitoring row names its alarm count").not.toBeNull();
    exampleTemplate({}).resourceCountIs("AWS::CloudWatch::Alarm", Number(alarms?.[1]));
  });
});
