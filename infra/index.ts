// The CDK entry point of the package, "aws-outbox-relay/cdk": the constructs and the types of their props. Only
// this entry imports aws-cdk-lib and constructs (the package's optional peer dependencies).

export type { OutboxLimits } from "../functions/shared/outbox/limits.ts";
export { OutboxConsumer, type OutboxConsumerProps } from "./consumer.ts";
export type { OutboxLoginRotationProps, OutboxLoginsProps } from "./logins.ts";
export { stackCreationSuffix } from "./naming.ts";
export type { CreateEndpoints } from "./network.ts";
// The types of two props (`largePayloads`, `routes`), for an app that builds them apart from the construct.
export {
  type OutboxAlarmProps,
  type OutboxDatabaseProps,
  type OutboxPurgeProps,
  OutboxRelay,
  type OutboxRelayProps,
  type OutboxRelayTuning,
} from "./outboxRelay.ts";
export type { LargePayloadsProps } from "./payloadBucket.ts";
export type { OutboxRoute } from "./routes.ts";
