import { Duration, Lazy, type RemovalPolicy, Stack, Token, Validations } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as iam from "aws-cdk-lib/aws-iam";
import type * as kms from "aws-cdk-lib/aws-kms";
import * as s3 from "aws-cdk-lib/aws-s3";
import type { Construct } from "constructs";
import { CLAIM_CHECK_SETTINGS } from "../functions/shared/destinations/claimCheck/settings.ts";
import { environmentOf } from "./environment.ts";
import type { CreateEndpoints } from "./network.ts";

/** `largePayloads` of OutboxRelay: payloads too large for the destination go through S3 (docs/large-payloads.md). */
export interface LargePayloadsProps {
  /**
   * An existing bucket; its lifecycle and policies are yours (keep objects at least PAYLOAD_EXPIRATION_DAYS).
   * Default: one created here, SSE-S3 (or SSE-KMS with `encryptionKey`), TLS only, public access blocked,
   * objects expiring after 35 days, and a bucket policy that lets only the relay's role write objects and only
   * it and the consumers' roles (`consumer`, an OutboxConsumer given `payloadBucket`, `grantPayloadRead`) read
   * them.
   */
  readonly bucket?: s3.IBucket;
  /**
   * A customer managed KMS key for the created bucket (SSE-KMS, with an S3 Bucket Key): who may read payloads is
   * then also who may decrypt with the key, as for a queue encrypted with one. The relay's role gets
   * kms:GenerateDataKey/Encrypt on it, each consumer given `payloadBucket` kms:Decrypt. Not with `bucket` (a given
   * bucket's encryption is its own: import it with its `encryptionKey` so the grants include the key). Default
   * none: SSE-S3.
   */
  readonly encryptionKey?: kms.IKey;
  /** Key prefix of the payload objects; the relay may write under it only. Default `outbox-payloads/`. */
  readonly prefix?: string;
  /** Payloads over this many bytes always go through S3. Default: only those whose message would not fit. */
  readonly thresholdBytes?: number;
  /**
   * Largest payload, in bytes of its JSON. Default 64 MiB. The one payload setting: the migrations write it to the
   * outbox's limits row (the insert and `enqueue` refuse more) and the relay gets it as OUTBOX_MAX_PAYLOAD_BYTES.
   */
  readonly maxPayloadBytes?: number;
}

/**
 * How long a payload object must outlive its message: the queue keeps a message up to 14 days (SQS's maximum,
 * what the construct's queue is set to), its dead-letter queue another 14 (a message's age counts from its first
 * enqueue there only for FIFO: "the expiration of a message is always based on its original enqueue timestamp"
 * for standard queues, so 14 + 14 covers both), and a redrive takes up to a week to be noticed and run. An
 * object expired before its message is read fails that record loudly (consumer/claimCheck.ts).
 */
export const QUEUE_RETENTION_DAYS = 14;
export const DEAD_LETTER_RETENTION_DAYS = 14;
export const REDRIVE_WINDOW_DAYS = 7;
export const PAYLOAD_EXPIRATION_DAYS =
  QUEUE_RETENTION_DAYS + DEAD_LETTER_RETENTION_DAYS + REDRIVE_WINDOW_DAYS;
export const DEFAULT_PAYLOAD_PREFIX = "outbox-payloads/";

/**
 * Who the created bucket's policy lets at its objects: the relay's role writes, the consumers' roles read. Filled
 * by grantPayloadWrite and grantPayloadRead, whichever construct calls them and whenever (the policy's lists are
 * lazy), so a consumer made after the relay is let in too. A given bucket has none: its policies are its owner's.
 */
interface PayloadAccess {
  readonly writers: iam.IRole[];
  readonly readers: iam.IRole[];
}
const ACCESS = new WeakMap<s3.IBucket, PayloadAccess>();

export interface PayloadBucket {
  readonly bucket: s3.IBucket;
  readonly prefix: string;
  /** The relay's OUTBOX_PAYLOAD_* variables. */
  readonly environment: Record<string, string>;
}

export function payloadBucket(
  scope: Construct,
  props: LargePayloadsProps,
  removalPolicy: RemovalPolicy,
): PayloadBucket {
  const prefix = props.prefix ?? DEFAULT_PAYLOAD_PREFIX;
  if (props.bucket !== undefined && props.encryptionKey !== undefined) {
    throw new Error(
      "OutboxRelay largePayloads.encryptionKey is for the bucket the construct creates; a given bucket keeps its " +
        "own encryption (import it with its encryptionKey, e.g. Bucket.fromBucketAttributes)",
    );
  }
  const bucket = props.bucket ?? createdBucket(scope, prefix, removalPolicy, props.encryptionKey);
  const C = CLAIM_CHECK_SETTINGS;
  const environment = {
    [C.bucket.env]: bucket.bucketName,
    ...environmentOf("OutboxRelay", [
      ["largePayloads.prefix", C.prefix, prefix],
      ["largePayloads.thresholdBytes", C.thresholdBytes, props.thresholdBytes],
      ["largePayloads.maxPayloadBytes", C.maxPayloadBytes, props.maxPayloadBytes],
    ]),
  };
  return { bucket, prefix, environment };
}

function createdBucket(
  scope: Construct,
  prefix: string,
  removalPolicy: RemovalPolicy,
  encryptionKey: kms.IKey | undefined,
): s3.Bucket {
  const bucket = new s3.Bucket(scope, "PayloadBucket", {
    ...(encryptionKey === undefined
      ? { encryption: s3.BucketEncryption.S3_MANAGED }
      : // A Bucket Key: S3 asks KMS for a bucket-level key instead of one request per object (KMS request costs).
        { encryption: s3.BucketEncryption.KMS, encryptionKey, bucketKeyEnabled: true }),
    enforceSSL: true,
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    removalPolicy,
    lifecycleRules: [
      {
        id: "ExpirePayloads",
        prefix,
        expiration: Duration.days(PAYLOAD_EXPIRATION_DAYS),
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
  });
  restrictObjectAccess(bucket);
  Validations.of(bucket).acknowledge({
    id: "AwsSolutions-S1",
    reason:
      "Payload objects are written by the relay's role only and expire after 35 days; server access logs would " +
      "need a second bucket. CloudTrail S3 data events cover object-level auditing where it is required.",
  });
  return bucket;
}

/**
 * The created bucket's Deny statements, beside the TLS-only one `enforceSSL` adds. In one account a request is
 * allowed when the caller's identity policy or the bucket policy allows it and no statement of either denies it
 * (IAM User Guide, "Policy evaluation logic", and S3 User Guide, "How Amazon S3 authorizes a request for an object
 * operation"): without these, any role of the account with a broad `s3:GetObject` (an admin's, a data job's)
 * reads every payload, whatever the queue's own policy or key allows. So reads are denied to every principal but
 * the relay's and the consumers' roles, writes and deletes to every principal but the relay's (nobody deletes:
 * the lifecycle rule expires objects, and lifecycle actions are not requests a bucket policy sees). By
 * `aws:PrincipalArn` (the role's ARN for each of its sessions), not by `Principal`: a `Principal` naming a role is
 * stored as its unique id, so a role deleted and created again under the same name would be denied; the
 * condition compares the ARN (IAM User Guide, "AWS global condition context keys", aws:PrincipalArn). A service
 * principal has no such key and is denied too: no AWS service reads payloads on the consumers' behalf.
 */
function restrictObjectAccess(bucket: s3.Bucket): void {
  const access: PayloadAccess = { writers: [], readers: [] };
  ACCESS.set(bucket, access);
  const arnsOf = (roles: () => iam.IRole[]) =>
    Lazy.list({ produce: () => [...new Set(roles().map((role) => role.roleArn))] });
  bucket.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: "OnlyTheOutboxRelayWritesPayloads",
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
      resources: [bucket.arnForObjects("*")],
      conditions: { ArnNotLike: { "aws:PrincipalArn": arnsOf(() => access.writers) } },
    }),
  );
  bucket.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: "OnlyOutboxRolesReadPayloads",
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ["s3:GetObject", "s3:GetObjectVersion"],
      resources: [bucket.arnForObjects("*")],
      // The relay's role too, so the list is never empty: it has no s3:GetObject of its own to use it with.
      conditions: {
        ArnNotLike: { "aws:PrincipalArn": arnsOf(() => [...access.writers, ...access.readers]) },
      },
    }),
  );
}

/** A role let in by the created bucket's policy must be named from the bucket's stack. */
function admit(bucket: s3.IBucket, role: iam.IRole, list: keyof PayloadAccess): void {
  const access = ACCESS.get(bucket);
  if (access === undefined) return;
  if (Token.isUnresolved(role.roleArn) && Stack.of(role) !== Stack.of(bucket)) {
    // The policy would refer to the role's stack while that stack refers to the bucket: a cycle CDK refuses.
    throw new Error(
      `OutboxRelay payload bucket: the role ${role.node.path} is in another stack than the bucket ` +
        `(${Stack.of(bucket).stackName}), whose policy must name it; import the role into the bucket's stack by ` +
        "its ARN (iam.Role.fromRoleArn) and grant that",
    );
  }
  access[list].push(role);
}

/** s3:PutObject under the prefix: the relay writes (and on a retry overwrites) `prefix + outbox id` only. */
export function grantPayloadWrite(payloads: PayloadBucket, role: iam.IRole): void {
  grantObjects(payloads, role, "s3:PutObject");
  payloads.bucket.encryptionKey?.grantEncrypt(role);
  admit(payloads.bucket, role, "writers");
}

/**
 * s3:GetObject under the prefix: the consumer resolves pointers. The created bucket's policy lets the role in too
 * (restrictObjectAccess).
 */
export function grantPayloadRead(payloads: Pick<PayloadBucket, "bucket" | "prefix">, role: iam.IRole): void {
  grantObjects(payloads, role, "s3:GetObject");
  payloads.bucket.encryptionKey?.grantDecrypt(role);
  admit(payloads.bucket, role, "readers");
}

/** OutboxRelay.grantPayloadRead: the grantee's role, with the errors that name what is missing. */
export function grantPayloadReadTo(payloads: PayloadBucket | undefined, grantee: iam.IGrantable): void {
  if (payloads === undefined) {
    throw new Error("OutboxRelay.grantPayloadRead: there is no payload bucket without largePayloads");
  }
  const role = grantee.grantPrincipal as Partial<iam.IRole>;
  if (role.roleArn === undefined || role.addToPrincipalPolicy === undefined) {
    throw new Error(
      "OutboxRelay.grantPayloadRead: the grantee's principal must be an IAM role (a function, a task role, an " +
        "iam.Role): the bucket's policy admits readers by their role's ARN",
    );
  }
  grantPayloadRead(payloads, role as iam.IRole);
}

function grantObjects(
  payloads: Pick<PayloadBucket, "bucket" | "prefix">,
  role: iam.IRole,
  action: "s3:PutObject" | "s3:GetObject",
): void {
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: [action],
      resources: [payloads.bucket.arnForObjects(`${payloads.prefix}*`)],
    }),
  );
  acknowledgeObjectWildcard(payloads, role);
}

/** cdk-nag v3 acknowledges exact findings: the `prefix*` object ARN, as the rule prints it. */
function acknowledgeObjectWildcard(
  payloads: Pick<PayloadBucket, "bucket" | "prefix">,
  role: iam.IRole,
): void {
  const { bucket, prefix } = payloads;
  const arn = asNagPrints(Stack.of(role).resolve(bucket.arnForObjects(`${prefix}*`)));
  Validations.of(role).acknowledge({
    id: `AwsSolutions-IAM5[Resource::${arn}]`,
    reason:
      "The payload objects' keys are the prefix plus an outbox id, unknown until an event is written: the " +
      "wildcard covers that one prefix of the payload bucket, for this one action.",
  });
}

/**
 * A resolved CloudFormation value as cdk-nag prints it in a finding: joins joined, `{"Ref": "X"}` as `<X>`, a
 * GetAtt as `<Id.Attribute>` (cdk-nag's flattenCfnReference). A created bucket's ARN is a GetAtt, an imported one's
 * a join with the partition.
 */
function asNagPrints(value: unknown): string {
  if (typeof value === "string") return value;
  const node = value as Record<string, unknown>;
  if (Array.isArray(node["Fn::Join"])) {
    const [delimiter, items] = node["Fn::Join"] as [string, unknown[]];
    return items.map(asNagPrints).join(delimiter);
  }
  if (typeof node.Ref === "string") return `<${node.Ref}>`;
  if (Array.isArray(node["Fn::GetAtt"])) return `<${(node["Fn::GetAtt"] as string[]).join(".")}>`;
  return JSON.stringify(value);
}

/**
 * The relay's route to S3. Behind interface endpoints the functions' group lists its egress, so it gets HTTPS to
 * any address: a gateway endpoint has no security group, and S3's prefix list cannot be named in CloudFormation
 * without a custom resource to look it up; in a VPC without NAT nothing else is routable on it. Unless
 * `createEndpoints` is `none` (an imported VPC's default: infra/network.ts), an S3 gateway endpoint goes on the
 * Lambdas' route tables, with or without NAT: it is free, where each payload through NAT costs $0.045/GB each
 * way. A route table takes one S3 gateway endpoint, so one the app already made in this VPC is used instead.
 */
export function s3Route(
  scope: Construct,
  props: {
    vpc: ec2.IVpc;
    subnets: ec2.SubnetSelection | undefined;
    groups: readonly ec2.ISecurityGroup[];
    behindEndpoints: boolean;
    create: CreateEndpoints;
  },
): ec2.IGatewayVpcEndpoint | undefined {
  if (props.behindEndpoints) {
    for (const group of props.groups) {
      group.addEgressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(443), "HTTPS to S3 through its gateway endpoint");
    }
  }
  if (props.create === "none") return undefined;
  return (
    appS3Endpoint(props.vpc) ??
    new ec2.GatewayVpcEndpoint(scope, "S3Endpoint", {
      vpc: props.vpc,
      service: ec2.GatewayVpcEndpointAwsService.S3,
      ...(props.subnets === undefined ? {} : { subnets: [props.subnets] }),
    })
  );
}

/** An S3 gateway endpoint this app already made in `vpc` (`gatewayEndpoints`, `addGatewayEndpoint`). */
function appS3Endpoint(vpc: ec2.IVpc): ec2.GatewayVpcEndpoint | undefined {
  return vpc.node
    .findAll()
    .find(
      (child): child is ec2.GatewayVpcEndpoint =>
        child instanceof ec2.GatewayVpcEndpoint &&
        /\.s3$/.test(
          String((child.node.defaultChild as ec2.CfnVPCEndpoint).serviceName).replace(
            /\$\{Token\[[^\]]*\]\}$/,
            "",
          ),
        ),
    );
}
