import { CfnResource, Stack } from "aws-cdk-lib";
import type { IConstruct } from "constructs";

/**
 * Lambda refuses a function whose environment variables take more than 4 KB together (Lambda developer guide,
 * "Lambda quotas": "Environment variables: 4 KB, for all environment variables associated with the function, in
 * aggregate"). The limit counts the values CloudFormation resolves at deploy, not synth's tokens: a created
 * queue's URL is ~60 bytes longer than any placeholder, so a table that looked small at synth failed to create.
 */
export const LAMBDA_ENVIRONMENT_MAX_BYTES = 4096;

/**
 * Fails synth when `environment`, with every CloudFormation value at the longest it can resolve to, could exceed
 * Lambda's 4 KB. Why the route table stays in the environment rather than in SSM Parameter Store or the database:
 * both would add a read at every cold start and a second place the deployed truth lives (and, behind VPC
 * endpoints, an SSM endpoint), while a bound checked here gives the same loud answer at `cdk synth` that Lambda
 * would give at deploy. About 20 routes to created queues fit (docs/deploy.md, "Routing").
 */
export function checkEnvironmentSize(
  scope: IConstruct,
  name: string,
  environment: Record<string, string>,
): void {
  const bytes = longestEnvironmentBytes(scope, environment);
  if (bytes > LAMBDA_ENVIRONMENT_MAX_BYTES) {
    const largest = Object.entries(environment)
      .map(([key, value]) => [key, longestBytes(Stack.of(scope), Stack.of(scope).resolve(value))] as const)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 2)
      .map(([key, size]) => `${key} ${size}`)
      .join(", ");
    throw new Error(
      `OutboxRelay: the ${name} Lambda's environment can resolve to ${bytes} bytes at deploy (the longest names ` +
        `CloudFormation can give the resources it names), over Lambda's ${LAMBDA_ENVIRONMENT_MAX_BYTES} for all ` +
        `variables together (largest: ${largest}); merge routes (a pattern list matches several types), give ` +
        "created queues and topics short names, or split the outbox",
    );
  }
}

/** The environment's size as Lambda counts it (keys and values), at the longest resolution of each value. */
export function longestEnvironmentBytes(scope: IConstruct, environment: Record<string, string>): number {
  const stack = Stack.of(scope);
  let total = 0;
  for (const [key, value] of Object.entries(environment)) {
    total += Buffer.byteLength(key) + longestBytes(stack, stack.resolve(value));
  }
  return total;
}

const REGION = 14;
const PARTITION = 10;
const URL_SUFFIX = 16;
const ACCOUNT = 12;
// The longest value of each pseudo parameter: regions such as ap-southeast-4 (14), the aws-iso-b partition,
// China's amazonaws.com.cn, a stack name's 128 characters and its id's ARN around it.
const PSEUDO: Record<string, number> = {
  "AWS::Region": REGION,
  "AWS::Partition": PARTITION,
  "AWS::URLSuffix": URL_SUFFIX,
  "AWS::AccountId": ACCOUNT,
  "AWS::StackName": 128,
  "AWS::StackId": 64 + 128 + 36,
  "AWS::NoValue": 0,
};

/** A name CloudFormation generates, `<stack>-<logical id>-<13 random>`, up to the service's limit. */
const NAME_LIMITS: Record<string, number> = {
  "AWS::SQS::Queue": 80,
  "AWS::SNS::Topic": 256,
  "AWS::Kinesis::Stream": 128,
  "AWS::Events::EventBus": 256,
  "AWS::S3::Bucket": 63,
  "AWS::SecretsManager::Secret": 512,
  "AWS::SecretsManager::SecretTargetAttachment": 512,
};

// `arn:<partition>:` and `:<region>:<account>:` around the service.
const ARN_PREFIX = 4 + PARTITION + 1 + 1 + REGION + 1 + ACCOUNT + 1;
// Unknown attributes and resources: as long as an ARN with a long name.
const UNKNOWN = 512;

function longestBytes(stack: Stack, value: unknown): number {
  if (typeof value === "string") return Buffer.byteLength(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value).length;
  if (value === null || typeof value !== "object") return 0;
  const object = value as Record<string, unknown>;
  if ("Ref" in object) {
    const ref = String(object.Ref);
    return PSEUDO[ref] ?? referenceBytes(stack, ref, "Ref");
  }
  if ("Fn::GetAtt" in object) {
    const [id, attribute] = object["Fn::GetAtt"] as [string, string];
    return referenceBytes(stack, id, attribute);
  }
  if ("Fn::Join" in object) {
    const [separator, parts] = object["Fn::Join"] as [string, unknown[]];
    if (!Array.isArray(parts)) return UNKNOWN;
    return (
      parts.reduce<number>((sum, part) => sum + longestBytes(stack, part), 0) +
      Buffer.byteLength(separator) * Math.max(0, parts.length - 1)
    );
  }
  // Fn::Select of Fn::Split (a stack's suffix) and anything else: no longer than what it takes apart.
  if ("Fn::Select" in object) {
    const [, list] = object["Fn::Select"] as [unknown, unknown];
    return longestBytes(stack, list);
  }
  if ("Fn::Split" in object) {
    const [, source] = object["Fn::Split"] as [string, unknown];
    return longestBytes(stack, source);
  }
  return UNKNOWN;
}

/** The longest a Ref or attribute of a resource of this stack can resolve to. */
function referenceBytes(stack: Stack, logicalId: string, attribute: string): number {
  const resource = stack.node
    .findAll()
    .find(
      (child): child is CfnResource =>
        child instanceof CfnResource && stack.resolve(child.logicalId) === logicalId,
    );
  if (resource === undefined) return UNKNOWN;
  const type = resource.cfnResourceType;
  const limit = NAME_LIMITS[type];
  const generated =
    limit === undefined
      ? UNKNOWN
      : Math.min(limit, stack.stackName.length + 1 + logicalId.length + 1 + 13 + ".fifo".length);
  const name = givenName(stack, resource) ?? generated;
  const arn = (service: string, resourcePart: string) =>
    ARN_PREFIX + service.length + resourcePart.length + name;
  switch (type) {
    case "AWS::SQS::Queue":
      if (attribute === "Ref") {
        return "https://sqs.".length + REGION + 1 + URL_SUFFIX + 1 + ACCOUNT + 1 + name;
      }
      return attribute === "QueueName" ? name : arn("sqs", "");
    case "AWS::SNS::Topic":
      return attribute === "TopicName" ? name : arn("sns", "");
    case "AWS::Kinesis::Stream":
      return attribute === "Ref" ? name : arn("kinesis", "stream/");
    case "AWS::Events::EventBus":
      return attribute === "Ref" || attribute === "Name" ? name : arn("events", "event-bus/");
    case "AWS::S3::Bucket":
      return attribute === "Ref" ? name : arn("s3", "");
    case "AWS::SecretsManager::Secret":
      // A secret's ARN ends in `-` and 6 random characters.
      return arn("secretsmanager", "secret:") + 7;
    case "AWS::SecretsManager::SecretTargetAttachment":
      // Its Ref is the ARN of the secret it attaches.
      return longestBytes(stack, templateProperties(stack, resource).SecretId);
    default:
      return UNKNOWN;
  }
}

/** A name set in the template (QueueName, TopicName, Name, BucketName): its own longest resolution. */
function givenName(stack: Stack, resource: CfnResource): number | undefined {
  const properties = templateProperties(stack, resource);
  for (const key of ["QueueName", "TopicName", "Name", "BucketName"]) {
    if (properties[key] !== undefined) return longestBytes(stack, properties[key]);
  }
  return undefined;
}

/** A resource's properties as the template will hold them (CDK's own rendering of the L1). */
function templateProperties(stack: Stack, resource: CfnResource): Record<string, unknown> {
  const rendered = stack.resolve(
    (resource as unknown as { _toCloudFormation(): unknown })._toCloudFormation(),
  ) as { Resources: Record<string, { Properties?: Record<string, unknown> }> };
  return Object.values(rendered.Resources)[0]?.Properties ?? {};
}
