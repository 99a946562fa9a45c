import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { LAMBDA_ENVIRONMENT_MAX_BYTES } from "../../infra/environmentSize.ts";
import { OutboxRelay, type OutboxRoute } from "../../infra/outboxRelay.ts";
import { importedNetwork, newApp, type Resource } from "../support/template.ts";

/**
 * Issue 40, item 2: a route table that synthesizes must deploy. Lambda's 4 KB counts the values CloudFormation
 * resolves; synth sees tokens. Each test renders the relay's environment at the longest names CloudFormation
 * generates (`<stack>-<logical id>-<13 random>`, SQS's capped at 80) in the longest region and partition.
 */
const STACK = "OrdersServiceProduction";
const FITTING = 17;

function routedStack(count: number) {
  const stack = new Stack(newApp(), STACK);
  const { vpc, secret } = importedNetwork(stack);
  const routes: OutboxRoute[] = [];
  for (let index = 0; index < count; index++) {
    const destination =
      index % 2 === 0
        ? new sqs.Queue(stack, `FulfilmentQueue${index}`, { fifo: true, enforceSSL: true })
        : new sns.Topic(stack, `NotificationTopic${index}`, { fifo: true, enforceSSL: true });
    routes.push({ match: { aggregateType: `aggregate${index}` }, destination });
  }
  new OutboxRelay(stack, "Outbox", { database: { secret, vpc }, routes, migrations: false });
  return stack;
}

/** An independent rendering of a template value at the longest names (not the construct's own estimate). */
function render(value: unknown, resources: Record<string, Resource>): string {
  if (typeof value === "string") return value;
  if (typeof value === "number") return String(value);
  const object = value as Record<string, unknown>;
  const generated = (id: string, limit: number, fifo: boolean) =>
    `${STACK}-${id}-${"X".repeat(13)}`.slice(0, limit - (fifo ? 5 : 0)) + (fifo ? ".fifo" : "");
  if ("Ref" in object) {
    const ref = String(object.Ref);
    const pseudo: Record<string, string> = {
      "AWS::Region": "ap-southeast-4",
      "AWS::Partition": "aws-iso-b",
      "AWS::URLSuffix": "amazonaws.com.cn",
      "AWS::AccountId": "123456789012",
    };
    if (pseudo[ref] !== undefined) return pseudo[ref];
    const resource = resources[ref];
    if (resource?.Type === "AWS::SQS::Queue") {
      return `https://sqs.ap-southeast-4.amazonaws.com.cn/123456789012/${generated(ref, 80, true)}`;
    }
    if (resource?.Type === "AWS::SNS::Topic") {
      return `arn:aws-iso-b:sns:ap-southeast-4:123456789012:${generated(ref, 256, true)}`;
    }
    throw new Error(`no rendering for Ref ${ref} (${resource?.Type})`);
  }
  if ("Fn::Join" in object) {
    const [separator, parts] = object["Fn::Join"] as [string, unknown[]];
    return parts.map((part) => render(part, resources)).join(separator);
  }
  if ("Fn::GetAtt" in object) {
    const [id] = object["Fn::GetAtt"] as [string, string];
    const resource = resources[id];
    if (resource?.Type === "AWS::SQS::Queue") {
      return `arn:aws-iso-b:sqs:ap-southeast-4:123456789012:${generated(id, 80, true)}`;
    }
    if (resource?.Type === "AWS::SNS::Topic") return generated(id, 256, true);
  }
  throw new Error(`no rendering for ${JSON.stringify(value)}`);
}

function relayEnvironmentBytes(stack: Stack): number {
  const template = Template.fromStack(stack).toJSON();
  const resources = template.Resources as Record<string, Resource>;
  const relay = Object.entries(resources).find(([id]) => /^OutboxRelayFunction/.test(id))?.[1];
  if (relay === undefined) throw new Error("no relay function");
  const variables = (relay.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment
    .Variables;
  return Object.entries(variables).reduce(
    (sum, [key, value]) => sum + Buffer.byteLength(key) + Buffer.byteLength(render(value, resources)),
    0,
  );
}

describe("the relay's environment at the names CloudFormation resolves", () => {
  it("refuses at synth a table whose resolved environment exceeds Lambda's 4 KB (20 routes to created queues and topics)", () => {
    expect(() => routedStack(20)).toThrow(
      /relay Lambda's environment can resolve to \d+ bytes.*over Lambda's 4096/s,
    );
  });

  it("accepts only tables that fit when every name is the longest CloudFormation generates", () => {
    // The boundary, measured: 17 routes (half FIFO queues, half FIFO topics, names as above) fit; the 18th is
    // refused at synth (before, synth accepted 20 and more, which then failed Lambda's limit at deploy).
    const fitting = routedStack(FITTING);
    expect(relayEnvironmentBytes(fitting)).toBeLessThanOrEqual(LAMBDA_ENVIRONMENT_MAX_BYTES);
    expect(() => routedStack(FITTING + 1)).toThrow(/environment can resolve to/);
    // Two syntheses of ~40 resources each: CPU-bound, slow on a shared machine.
  }, 240_000);
});
