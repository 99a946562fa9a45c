// "aws-outbox-relay/relay": the relay for hosts other than the bundled Lambda (a container, a worker): its
// settings, one invocation (what the Lambda and `outbox relay` run), and the destinations it publishes to.

export { RolesElsewhereError } from "../db/rolesHere.ts";
export {
  type CreatedDestination,
  createDestination,
  type DestinationClientOptions,
} from "../destinations/create.ts";
export type { Destination, LoadedRow, Prepared, PublishResult } from "../destinations/destination.ts";
export { type EventBridgeOptions, eventBridgeDestination } from "../destinations/eventBridge/eventBridge.ts";
export {
  type DestinationSetting,
  destinationSettingFromEnv,
  type EventBridgeSetting,
  type SqsFifoSetting,
} from "../destinations/setting.ts";
export { type SqsFifoOptions, sqsFifoDestination } from "../destinations/sqs/sqsFifo.ts";
export { DEFAULT_RELAY_OPTIONS, type RelayOptions, type RelaySummary, type RoundReport } from "./engine.ts";
export {
  checkDestination,
  type InvocationDeps,
  type InvocationSummary,
  invocationDeadline,
  NoProgressError,
  relayInvocation,
  relaySessions,
} from "./invocation.ts";
export { OrderKeyError } from "./orderKey.ts";
export { type RelayConfig, relayConfigFromEnv } from "./settings.ts";
