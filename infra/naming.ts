import { Aws, Fn, Stack, Token } from "aws-cdk-lib";
import type { IConstruct } from "constructs";

import { DEFAULT_METRICS_NAMESPACE } from "../functions/shared/observe/settings.ts";

export { DEFAULT_METRICS_NAMESPACE };

/**
 * The prefix of one instance's Powertools service names, and so of the `service` dimension its metrics and
 * alarms use. Two outboxes in one account must not share it: their relays' figures would be summed and each
 * one's alarms would fire on the other's backlog. The default is the stack's name and the construct's path in
 * it ("OrdersStack-Outbox"): CloudFormation stack names are unique in a region, and metrics are regional.
 */
export function defaultServicePrefix(scope: IConstruct): string {
  const stack = Stack.of(scope);
  const path = scope.node.path.slice(stack.node.path.length).split("/").filter(Boolean).join("-");
  const stackName = Token.isUnresolved(stack.stackName) ? stack.node.id : stack.stackName;
  return `${stackName}-${path}`;
}

const claimed = new WeakMap<IConstruct, Map<string, string>>();

/**
 * Refuses a second instance in the same app with the same namespace and service prefix (both given
 * explicitly, say), naming both constructs. Instances in other apps are told apart by the default above.
 */
export function claimMetricsIdentity(scope: IConstruct, namespace: string, servicePrefix: string): void {
  const root = scope.node.root;
  let names = claimed.get(root);
  if (names === undefined) {
    names = new Map();
    claimed.set(root, names);
  }
  const key = `${namespace}\0${servicePrefix}`;
  const owner = names.get(key);
  if (owner !== undefined) {
    throw new Error(
      `OutboxRelay ${scope.node.path}: metrics namespace "${namespace}" and serviceName "${servicePrefix}" are ` +
        `already used by ${owner}; two outboxes sharing them would mix their metrics and alarms. Give each its ` +
        "own serviceName (or leave it unset: the default is unique per stack and construct)",
    );
  }
  names.set(key, scope.node.path);
}

/**
 * Eight hex characters that are new for every stack CloudFormation creates and fixed for its lifetime: the start
 * of the UUID that ends the stack's id (arn:...:stack/<name>/<uuid>). A name that carries it never collides with
 * a resource retained from an earlier stack of the same name (DeletionPolicy Retain outlives `cdk destroy`).
 */
export function stackCreationSuffix(): string {
  return Fn.select(0, Fn.split("-", Fn.select(2, Fn.split("/", Aws.STACK_ID))));
}
