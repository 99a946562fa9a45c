import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CfnResource, CustomResource, Duration, Stack, Validations } from "aws-cdk-lib";
import * as iam from "aws-cdk-lib/aws-iam";
import type * as lambda from "aws-cdk-lib/aws-lambda";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as cr from "aws-cdk-lib/custom-resources";
import { type Construct, Dependable, type IConstruct, type IDependable } from "constructs";
import { limitsPropertyOf, type OutboxLimits } from "../functions/shared/outbox/limits.ts";
import { DEFAULT_MIGRATIONS_DIR } from "./lambdaCode.ts";
import { type FunctionPlacement, logGroup, logsPolicy } from "./lambdas.ts";

export { DEFAULT_MIGRATIONS_DIR };

/**
 * The migrate Lambda's timeout: Lambda's maximum. What a deploy's migrations wait for, measured by
 * test/upgrade.test.ts (1M published + 10k pending rows, producers and the previous relay running; 2-core
 * machine): 0003's `create index concurrently` 5.4 s, 0004 1.4 s, 0005 0.2 s. The build scans the table (about
 * 5 s per million rows here) and waits, three times, for the transactions open at that moment: relay rounds, each
 * bounded by the relay's publish timeout and statement_timeout (tens of seconds at most), and the lock retries
 * take up to ~100 s. 15 minutes covers a table of over 100M rows; a larger one is migrated before the deploy
 * (`npm run migrate` from a host, which has no time limit), as docs/operations.md says.
 */
export const MIGRATE_TIMEOUT = Duration.minutes(15);

export interface MigrationsResourceProps {
  migrateFunction: lambda.Function;
  migrationsDir: string;
  /** What identifies the database the migrations run against: a change re-runs them there. */
  database: { secretArn: string; name: string; identity: string };
  schema: string;
  table: string;
  readiness: IDependable[];
  /**
   * The security groups whose rules the migrate Lambda's path to the database and to Secrets Manager needs (its
   * own, the database's, the endpoints'): the resource waits for every rule under them, so the first connection
   * is not tried before its ingress or egress rule exists.
   */
  network: IConstruct[];
  placement: FunctionPlacement;
  /** The relay's and purge's login secrets the migrate Lambda makes logins from: a new one re-runs it. */
  loginSecretArns?: string[];
  /**
   * The outbox's limits row (infra/outboxLimits.ts), written after the migrations: a change (another destination,
   * another size, largePayloads on or off) is an Update, which writes the new row.
   */
  limits?: OutboxLimits;
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
    // The framework answers within the migrate Lambda's timeout (MIGRATE_TIMEOUT, 15 minutes, Lambda's most)
    // plus the framework's own overhead; CloudFormation's default wait for a custom resource that never answers
    // is an hour. Why 15 minutes: docs/operations.md "Upgrading in place" has the measured figures.
    serviceTimeout: MIGRATE_TIMEOUT.plus(Duration.minutes(5)),
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
      ...(props.loginSecretArns === undefined || props.loginSecretArns.length === 0
        ? {}
        : { LoginSecretArns: props.loginSecretArns }),
      ...(props.limits === undefined ? {} : { Limits: limitsPropertyOf(props.limits) }),
    },
  });
  dependOnReadiness(resource, props.readiness);
  for (const group of props.network) {
    // A group of another stack: its rules live there, and a dependency on them could close a cycle between stacks.
    if (Stack.of(group) === Stack.of(resource)) resource.node.addDependency(group);
  }
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
 * The migrations wait for what `readiness` holds (the cluster, its writer, its secret's attachment), except a
 * secret rotation schedule in it: creating one rotates the secret at once (RotateSecret's `RotateImmediately`
 * defaults to true, https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_RotateSecret.html; CDK's
 * `rotateImmediatelyOnUpdate` defaults to true too), and between the rotation's setSecret and finishSecret the
 * database refuses the password the secret still holds. So the schedule waits for the migrations instead: the
 * first deploy migrates with the generated password, then rotates. The immediate rotation is kept (rather than
 * `rotateImmediatelyOnUpdate: false`): the generated password does not live a month, and a rotation that cannot
 * work (network, permissions) shows up during the deploy that set it up, not 30 days later. The Lambdas ride out
 * any later rotation's window (connection.ts, AUTH_RETRY_MS).
 */
function dependOnReadiness(resource: CustomResource, readiness: IDependable[]): void {
  const schedules: CfnResource[] = [];
  for (const dependable of readiness) {
    for (const root of Dependable.of(dependable).dependencyRoots) {
      for (const child of root.node.findAll()) {
        if (!(child instanceof CfnResource)) continue;
        if (child instanceof secretsmanager.CfnRotationSchedule && Stack.of(child) === Stack.of(resource)) {
          schedules.push(child);
        } else {
          resource.node.addDependency(child);
        }
      }
    }
  }
  for (const schedule of schedules) schedule.node.addDependency(resource);
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
