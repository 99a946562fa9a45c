// The CDK entry point of the package, "aws-outbox-relay/cdk": the constructs and the types of their props. Only
// this entry imports aws-cdk-lib and constructs (the package's optional peer dependencies).
export { OutboxConsumer, type OutboxConsumerProps } from "./consumer.ts";
export type { OutboxLoginRotationProps, OutboxLoginsProps } from "./logins.ts";
export { stackCreationSuffix } from "./naming.ts";
export type { CreateEndpoints } from "./network.ts";
export {
  type OutboxAlarmProps,
  type OutboxDatabaseProps,
  type OutboxPurgeProps,
  OutboxRelay,
  type OutboxRelayProps,
  type OutboxRelayTuning,
} from "./outboxRelay.ts";
