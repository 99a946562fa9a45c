import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { examplePropsFromContext, OutboxExampleStack } from "./exampleStack.ts";

// Run by the CDK CLI as `node infra/app.ts` (cdk.json): Node 24 strips the types, no build step.
// No `env`: the stack is environment-agnostic, so synth needs no account, no credentials and no lookups.
const app = new App();
const stackName = String(app.node.tryGetContext("stackName") ?? "OutboxRelayExample");
new OutboxExampleStack(app, stackName, {
  description: "Transactional outbox relay: PostgreSQL outbox table to SQS FIFO (example deployment)",
  ...examplePropsFromContext(app.node),
});
// cdk-nag's AWS Solutions rules as a synthesis validation plugin: any unacknowledged finding (error or warning)
// interrupts `cdk synth`. Acknowledgements live beside the resources they excuse, each with its reason.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
