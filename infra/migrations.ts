import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CustomResource, Duration, Stack, Validations } from "aws-cdk-lib";
import * as iam from "aws-cdk-lib/aws-iam";
import type * as lambda from "aws-cdk-lib/aws-lambda";
import * as cr from "aws-cdk-lib/custom-resources";
import type { Construct, IDependable } from "constructs";
import { DEFAULT_MIGRATIONS_DIR } from "./lambdaCode.ts";
import { type FunctionPlacement, logGroup, logsPolicy } from "./lambdas.ts";

export { DEFAULT_MIGRATIONS_DIR };

export interface MigrationsResourceProps {
  migrateFunction: lambda.Function;
  migrationsDir: string;
  /** What identifies the database the migrations run against: a change re-runs them there. */
  database: { secretArn: string; name: string; identity: string };
  schema: string;
  table: string;
  readiness: IDependable[];
  placement: FunctionPlacement;
}

/**
 * The deploy-time migrations: a custom resource whose properties change whenever the migrations must run again
 * (a new or edited file, another database, another outbox location), so CloudFormation sends Update and the
 * migrate Lambda applies what is pending. Resources that must not run before the schema is current depend on it.
 */
export function migrationsResource(scope: Construct, props: MigrationsResourceProps): CustomResource {
  const providerLogGroup = logGroup(scope, "MigrationsProviderLogs", props.placement);
  const providerRole = new iam.Role(scope, "MigrationsProviderRole", {
    assumedBy: new iam.ServicePrincipal("lambda.amazonaws.com"),
    description: "CDK provider framework for the outbox migrations: invokes the migrate Lambda, writes logs",
    inlinePolicies: { logs: logsPolicy(providerLogGroup) },
  });
  const provider = new cr.Provider(scope, "MigrationsProvider", {
    onEventHandler: props.migrateFunction,
    frameworkOnEventRole: providerRole,
    logGroup: providerLogGroup,
  });
  const resource = new CustomResource(scope, "Migrations", {
    serviceToken: provider.serviceToken,
    resourceType: "Custom::OutboxMigrations",
    // The framework answers within the migrate Lambda's 5 minutes; CloudFormation's default wait for a custom
    // resource that never answers is an hour.
    serviceTimeout: Duration.minutes(10),
    properties: {
      // A new or changed file changes the hash, which makes CloudFormation send Update: migrations re-run.
      MigrationsHash: hashMigrations(props.migrationsDir),
      // Pointing the construct at another database (another secret, name, or a replaced cluster) is an Update
      // too, so the new database is migrated before any relay polls it.
      DatabaseSecretArn: props.database.secretArn,
      DatabaseName: props.database.name,
      DatabaseIdentity: props.database.identity,
      Schema: props.schema,
      Table: props.table,
    },
  });
  for (const dependency of props.readiness) resource.node.addDependency(dependency);
  // cdk-nag v3 acknowledges exact findings; the IAM5 finding names the function's logical id.
  const migrateLogicalId = Stack.of(scope).getLogicalId(
    props.migrateFunction.node.defaultChild as lambda.CfnFunction,
  );
  Validations.of(providerRole).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${migrateLogicalId}.Arn>:*]`,
    reason:
      "CDK's provider framework grants lambda:InvokeFunction on the migrate function and its versions " +
      "(<arn>:*); the wildcard covers only qualifiers of that one function.",
  });
  return resource;
}

/**
 * sha256 over the migration files' names and contents, in order. Any added or edited file changes it; the
 * migration runner itself rejects edits to applied files, so a changed hash that only edits one fails loudly.
 */
export function hashMigrations(dir: string): string {
  const hash = createHash("sha256");
  for (const name of readdirSync(dir)
    .filter((file) => file.endsWith(".sql"))
    .sort()) {
    hash
      .update(name)
      .update("\0")
      .update(readFileSync(join(dir, name)))
      .update("\0");
  }
  return hash.digest("hex");
}
