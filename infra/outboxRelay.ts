import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CustomResource, Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as cloudwatchActions from "aws-cdk-lib/aws-cloudwatch-actions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as events from "aws-cdk-lib/aws-events";
import * as targets from "aws-cdk-lib/aws-events-targets";
import * as iam from "aws-cdk-lib/aws-iam";
import * as kms from "aws-cdk-lib/aws-kms";
import * as lambda from "aws-cdk-lib/aws-lambda";
import * as nodejs from "aws-cdk-lib/aws-lambda-nodejs";
import * as logs from "aws-cdk-lib/aws-logs";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import * as cr from "aws-cdk-lib/custom-resources";
import { Construct, type IDependable } from "constructs";
import { DEFAULT_BUDGET_MARGIN_MS, relayTiming } from "./relayTiming.ts";

/** The repository root: entries, lock file and migrations are found from here, whatever the working directory. */
export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));
export const DEFAULT_MIGRATIONS_DIR = join(PROJECT_ROOT, "migrations");

/** SQS's largest message since 2025; the queue attribute still defaults to 262,144 and must be set. */
export const SQS_MAX_MESSAGE_BYTES = 1_048_576;
/** What an existing queue most likely has when nobody raised it: the attribute's default. */
const SQS_DEFAULT_MESSAGE_BYTES = 262_144;

export interface OutboxDatabaseProps {
  /** Secrets Manager secret in the RDS format (username, password, host, port, dbname). Read, never copied. */
  readonly secret: secretsmanager.ISecret;
  /** Database name; default: the secret's `dbname`, else `postgres`. */
  readonly databaseName?: string;
  /** The database's VPC; the Lambdas run in it. */
  readonly vpc: ec2.IVpc;
  /** Subnets for the Lambdas; they need a route to SQS and Secrets Manager (NAT or VPC endpoints). */
  readonly vpcSubnets?: ec2.SubnetSelection;
  /**
   * The database (a cluster, instance, proxy, or `new ec2.Connections({ securityGroups, defaultPort })`): its
   * default port is opened to the Lambdas' security group. Omit it when `securityGroups` already get in.
   */
  readonly connections?: ec2.IConnectable;
  /** Security groups for the Lambdas instead of the one this construct creates (e.g. one the database trusts). */
  readonly securityGroups?: ec2.ISecurityGroup[];
  /** Secret used only by the deploy-time migrations, when the relay's user may not run DDL; default `secret`. */
  readonly migrationSecret?: secretsmanager.ISecret;
  /** What must be ready before migrations run: the cluster and its writer instance, say. */
  readonly readiness?: IDependable[];
}

/** Relay tuning; unset values keep the handler's defaults (functions/shared/relay.ts, relayConfig.ts). */
export interface OutboxRelayTuning {
  /** `dwell` (default) polls until the time budget ends; `drain` stops when nothing is claimable. */
  readonly mode?: "dwell" | "drain";
  readonly batchSize?: number;
  readonly concurrency?: number;
  readonly maxAttempts?: number;
  readonly backoffBaseMs?: number;
  readonly backoffMaxMs?: number;
  /** A dead letter blocks the rest of its aggregate (default false: parked, like an SQS FIFO DLQ). */
  readonly strictOrder?: boolean;
  /** Default 1 MiB for the queue this construct creates, 256 KiB (the attribute's default) for an existing one. */
  readonly maxMessageBytes?: number;
  /** Default 10 000. Part of the round reserve, so it also sizes the Lambda timeout. */
  readonly publishTimeoutMs?: number;
  /** Default 5 000. Part of the round reserve, so it also sizes the Lambda timeout. */
  readonly statementTimeoutMs?: number;
  /** Default 5 000: stop claiming this long before the Lambda deadline. */
  readonly budgetMarginMs?: number;
  /** Wake on LISTEN/NOTIFY (needs the notify trigger; pins RDS Proxy sessions). Default false. */
  readonly listen?: boolean;
  /** Default 512 MB: a batch of 100 rows of up to 1 MiB each is 100 MB of payload before serialization. */
  readonly memorySize?: number;
  /** Default computed (2 for a 1-minute schedule; see relayTiming.ts). `false` reserves nothing. */
  readonly reservedConcurrency?: number | false;
}

export interface OutboxPurgeProps {
  /** How often old rows are deleted. Default every hour. */
  readonly schedule?: Duration;
  /**
   * How often the purge Lambda only measures the outbox (a `{ "snapshotOnly": true }` event) and publishes the
   * backlog metrics the alarms read. Default every minute: the alarms' period.
   */
  readonly metricsSchedule?: Duration;
  /** Published rows older than this are deleted. Default 168 hours (7 days). */
  readonly retention?: Duration;
  /** Dead letters older than this are deleted; default: kept until redriven or removed by hand. */
  readonly deadLetterRetention?: Duration;
  /** Rows per DELETE statement. Default 5000. */
  readonly batchSize?: number;
  /** Default 5 minutes, or the schedule's interval if that is shorter. */
  readonly timeout?: Duration;
  /** Default 10 000: stop starting DELETE batches this long before the deadline. */
  readonly budgetMarginMs?: number;
}

export interface OutboxAlarmProps {
  /** Send ALARM and OK notifications to this topic. */
  readonly topic?: sns.ITopic;
  /** Create a KMS-encrypted, TLS-only topic for the alarms (ignored when `topic` is given). Default false. */
  readonly createTopic?: boolean;
  /** OldestPendingAgeSeconds above this alarms. Default 900 (see the comment where it is used). */
  readonly oldestPendingAgeSeconds?: number;
  /** PendingEvents above this alarms. Default 1000. */
  readonly pendingEvents?: number;
  /** BatchDuration p95 above this alarms. Default 5000 ms. */
  readonly batchDurationP95Ms?: number;
}

export interface OutboxRelayProps {
  readonly database: OutboxDatabaseProps;
  /** An existing FIFO queue to publish to; default: a queue created here (high throughput, 1 MiB, TLS only). */
  readonly queue?: sqs.IQueue;
  /** Encrypt the created queues with this key instead of SQS-managed keys (SSE-SQS). */
  readonly queueEncryptionKey?: kms.IKey;
  /** Receives after which a consumer's message moves to the created dead-letter queue. Default 5. */
  readonly consumerMaxReceiveCount?: number;
  /** Visibility timeout of the created queue: how long a consumer has per message. Default 30 s. */
  readonly consumerVisibilityTimeout?: Duration;
  readonly outboxSchema?: string;
  readonly outboxTable?: string;
  /** Prefix of the Powertools service names: `<prefix>-relay`, `<prefix>-purge`. Default `outbox`. */
  readonly serviceName?: string;
  /** CloudWatch namespace of the EMF metrics. Default `OutboxRelay`. */
  readonly metricsNamespace?: string;
  /** How often the relay is started. Default 1 minute (EventBridge's finest rate). */
  readonly relaySchedule?: Duration;
  readonly relay?: OutboxRelayTuning;
  readonly purge?: OutboxPurgeProps;
  /** Run the migrations at deploy time through a custom resource. Default true. */
  readonly migrations?: boolean;
  /** Folder of migration files; default the project's `migrations/`. */
  readonly migrationsDir?: string;
  readonly alarms?: OutboxAlarmProps;
  /** Create a CloudWatch dashboard. Default true. */
  readonly dashboard?: boolean;
  /** Retention of the Lambdas' log groups. Default one month. */
  readonly logRetention?: logs.RetentionDays;
  /** Removal policy of the queues and log groups. Default RETAIN: they may hold undelivered events and evidence. */
  readonly removalPolicy?: RemovalPolicy;
}

/**
 * The outbox relay for one outbox table: the SQS FIFO queue (or an existing one), the relay and purge Lambdas
 * on their schedules, optional deploy-time migrations, alarms and a dashboard.
 */
export class OutboxRelay extends Construct {
  readonly queue: sqs.IQueue;
  /** The dead-letter queue of the created queue's consumers (undefined for an existing queue). */
  readonly consumerDeadLetterQueue?: sqs.IQueue;
  readonly relayFunction: nodejs.NodejsFunction;
  readonly purgeFunction: nodejs.NodejsFunction;
  readonly migrateFunction?: nodejs.NodejsFunction;
  /** The migrations custom resource; schedules start only after it (a relay must not poll a missing table). */
  readonly migrations?: CustomResource;
  /** The EventBridge rules that start the relay, the purge, and the purge's snapshot-only runs. */
  readonly relayRule: events.Rule;
  readonly purgeRule: events.Rule;
  readonly metricsRule: events.Rule;
  /** Security groups of the Lambdas (created here unless given). */
  readonly securityGroups: ec2.ISecurityGroup[];
  readonly alarms: Record<string, cloudwatch.Alarm>;
  readonly alarmTopic?: sns.ITopic;
  readonly dashboard?: cloudwatch.Dashboard;
  readonly metricsNamespace: string;
  readonly relayServiceName: string;
  readonly purgeServiceName: string;

  readonly #props: OutboxRelayProps;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    this.#props = props;
    const db = props.database;
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    this.metricsNamespace = props.metricsNamespace ?? "OutboxRelay";
    this.relayServiceName = `${props.serviceName ?? "outbox"}-relay`;
    this.purgeServiceName = `${props.serviceName ?? "outbox"}-purge`;

    // --- Queue -------------------------------------------------------------------------------------------------
    if (props.queue !== undefined) {
      if (!props.queue.fifo) {
        throw new Error("OutboxRelay: the queue must be a FIFO queue (its name ends in .fifo)");
      }
      this.queue = props.queue;
    } else {
      const encryption =
        props.queueEncryptionKey === undefined
          ? { encryption: sqs.QueueEncryption.SQS_MANAGED }
          : { encryption: sqs.QueueEncryption.KMS, encryptionMasterKey: props.queueEncryptionKey };
      const dlq = new sqs.Queue(this, "ConsumerDeadLetterQueue", {
        fifo: true,
        maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
        retentionPeriod: Duration.days(14),
        enforceSSL: true,
        removalPolicy,
        ...encryption,
      });
      this.consumerDeadLetterQueue = dlq;
      this.queue = new sqs.Queue(this, "Queue", {
        fifo: true,
        // The relay sets MessageDeduplicationId to the outbox row id; hashing bodies would merge distinct events
        // that happen to carry the same payload.
        contentBasedDeduplication: false,
        // High-throughput FIFO: deduplication and the 300 TPS limit apply per message group (= aggregate), so
        // the queue scales with the number of aggregates (up to 70k TPS per action in large regions).
        deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
        fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
        maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
        // The longest SQS allows: consumers that are down for a long weekend lose nothing.
        retentionPeriod: Duration.days(14),
        visibilityTimeout: props.consumerVisibilityTimeout ?? Duration.seconds(30),
        // A message that fails 5 receives moves aside and unblocks its group (FIFO DLQ semantics).
        deadLetterQueue: { queue: dlq, maxReceiveCount: props.consumerMaxReceiveCount ?? 5 },
        enforceSSL: true,
        removalPolicy,
        ...encryption,
      });
    }

    // --- Network -------------------------------------------------------------------------------------------------
    if (db.securityGroups !== undefined && db.securityGroups.length > 0) {
      this.securityGroups = db.securityGroups;
    } else {
      const sg = new ec2.SecurityGroup(this, "FunctionsSecurityGroup", {
        vpc: db.vpc,
        description: "Outbox relay, purge and migration Lambdas",
        // Egress is listed, not open: HTTPS to the AWS APIs (SQS, Secrets Manager) and the database port,
        // which `connections` below adds on both sides.
        allowAllOutbound: false,
      });
      sg.addEgressRule(
        ec2.Peer.anyIpv4(),
        ec2.Port.tcp(443),
        "HTTPS to SQS and Secrets Manager (endpoints or NAT)",
      );
      this.securityGroups = [sg];
    }
    if (db.connections !== undefined) {
      for (const sg of this.securityGroups) {
        db.connections.connections.allowDefaultPortFrom(sg, "Outbox relay Lambdas to the database");
      }
    }

    // --- Relay ---------------------------------------------------------------------------------------------------
    const tuning = props.relay ?? {};
    const relayRate = props.relaySchedule ?? Duration.minutes(1);
    const budgetMarginMs = tuning.budgetMarginMs ?? DEFAULT_BUDGET_MARGIN_MS;
    const timing = relayTiming({
      scheduleSeconds: relayRate.toSeconds(),
      budgetMarginMs,
      ...(tuning.publishTimeoutMs === undefined ? {} : { publishTimeoutMs: tuning.publishTimeoutMs }),
      ...(tuning.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: tuning.statementTimeoutMs }),
    });
    const maxMessageBytes =
      tuning.maxMessageBytes ??
      (props.queue === undefined ? SQS_MAX_MESSAGE_BYTES : SQS_DEFAULT_MESSAGE_BYTES);
    const relayEnv: Record<string, string> = {
      ...this.#databaseEnv(db.secret),
      OUTBOX_QUEUE_URL: this.queue.queueUrl,
      RELAY_MODE: tuning.mode ?? "dwell",
      RELAY_MAX_DURATION_MS: String(timing.maxDurationMs),
      RELAY_BUDGET_MARGIN_MS: String(budgetMarginMs),
      RELAY_MAX_MESSAGE_BYTES: String(maxMessageBytes),
      POWERTOOLS_SERVICE_NAME: this.relayServiceName,
      POWERTOOLS_METRICS_NAMESPACE: this.metricsNamespace,
    };
    const optional: [string, number | boolean | undefined][] = [
      ["RELAY_BATCH_SIZE", tuning.batchSize],
      ["RELAY_CONCURRENCY", tuning.concurrency],
      ["RELAY_MAX_ATTEMPTS", tuning.maxAttempts],
      ["RELAY_BACKOFF_BASE_MS", tuning.backoffBaseMs],
      ["RELAY_BACKOFF_MAX_MS", tuning.backoffMaxMs],
      ["RELAY_STRICT_ORDER", tuning.strictOrder],
      ["RELAY_PUBLISH_TIMEOUT_MS", tuning.publishTimeoutMs],
      ["RELAY_STATEMENT_TIMEOUT_MS", tuning.statementTimeoutMs],
      ["RELAY_LISTEN", tuning.listen],
    ];
    for (const [name, value] of optional) if (value !== undefined) relayEnv[name] = String(value);

    const { role: relayRole, logGroup: relayLogs } = this.#executionRole("Relay");
    this.#grantSecretRead(relayRole, db.secret);
    // SendMessageBatch is authorized by sqs:SendMessage; the relay calls nothing else on the queue.
    relayRole.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ["sqs:SendMessage"], resources: [this.queue.queueArn] }),
    );
    this.queue.encryptionMasterKey?.grant(relayRole, "kms:GenerateDataKey", "kms:Decrypt");
    this.relayFunction = this.#function("Relay", {
      entry: "functions/relay/handler.ts",
      description: "Outbox relay: publishes committed outbox rows to SQS FIFO in per-aggregate order",
      role: relayRole,
      logGroup: relayLogs,
      timeout: Duration.seconds(timing.timeoutSeconds),
      memorySize: tuning.memorySize ?? 512,
      environment: relayEnv,
      reservedConcurrency:
        tuning.reservedConcurrency === false
          ? undefined
          : (tuning.reservedConcurrency ?? timing.reservedConcurrency),
    });
    // EventBridge invokes asynchronously. A tick that cannot start within a minute (throttled) is worth nothing
    // once the next tick has come, and a failed one is not retried: the next tick, 60 s later, is the retry.
    // Lambda's defaults (2 retries, events kept 6 hours) would queue stale ticks into exactly the pile-up the
    // reserved concurrency prevents.
    this.relayFunction.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.seconds(60) });
    this.relayRule = new events.Rule(this, "RelaySchedule", {
      description: `Starts the outbox relay every ${relayRate.toHumanString()}`,
      schedule: events.Schedule.rate(relayRate),
      targets: [
        new targets.LambdaFunction(this.relayFunction, {
          retryAttempts: 0,
          maxEventAge: Duration.seconds(60),
        }),
      ],
    });

    // --- Purge ---------------------------------------------------------------------------------------------------
    const purge = props.purge ?? {};
    const purgeRate = wholeMinutes(purge.schedule ?? Duration.hours(1), "purge.schedule");
    const metricsRate = wholeMinutes(purge.metricsSchedule ?? Duration.minutes(1), "purge.metricsSchedule");
    const purgeEnv: Record<string, string> = {
      ...this.#databaseEnv(db.secret),
      PURGE_RETENTION_HOURS: String(wholeHours(purge.retention ?? Duration.hours(168), "purge.retention")),
      PURGE_BATCH_SIZE: String(purge.batchSize ?? 5000),
      PURGE_BUDGET_MARGIN_MS: String(purge.budgetMarginMs ?? 10_000),
      POWERTOOLS_SERVICE_NAME: this.purgeServiceName,
      POWERTOOLS_METRICS_NAMESPACE: this.metricsNamespace,
    };
    if (purge.deadLetterRetention !== undefined) {
      purgeEnv.PURGE_DEAD_LETTER_RETENTION_HOURS = String(
        wholeHours(purge.deadLetterRetention, "purge.deadLetterRetention"),
      );
    }
    const { role: purgeRole, logGroup: purgeLogs } = this.#executionRole("Purge");
    this.#grantSecretRead(purgeRole, db.secret);
    this.purgeFunction = this.#function("Purge", {
      entry: "functions/purge/handler.ts",
      description: "Outbox purge: reports the outbox's backlog metrics and deletes old published rows",
      role: purgeRole,
      logGroup: purgeLogs,
      // 5 minutes, or the purge's interval if shorter, so two purges never overlap. A DELETE of 5000 rows takes
      // ~8 ms on a warm 1M-row table (functions/shared/purge.ts), so even a 1-minute run, stopping 10 s + one
      // 10 s statement timeout early, can remove millions of rows.
      timeout: purge.timeout ?? Duration.seconds(Math.min(300, purgeRate.toSeconds())),
      memorySize: 256,
      environment: purgeEnv,
      // Two: the hourly purge (up to its timeout) and a snapshot-only run (a few short reads, well under a
      // minute) may overlap; two purges cannot, since a purge's timeout is at most its interval. A third
      // invocation is throttled and dropped rather than queued.
      reservedConcurrency: 2,
    });
    this.purgeFunction.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.seconds(60) });
    this.purgeRule = new events.Rule(this, "PurgeSchedule", {
      description: `Starts the outbox purge every ${purgeRate.toHumanString()}`,
      schedule: events.Schedule.rate(purgeRate),
      targets: [
        new targets.LambdaFunction(this.purgeFunction, {
          retryAttempts: 0,
          maxEventAge: Duration.seconds(60),
        }),
      ],
    });
    // The backlog gauges must be fresher than an hourly purge: the same Lambda, asked for the snapshot only.
    this.metricsRule = new events.Rule(this, "MetricsSchedule", {
      description: `Measures the outbox (purge Lambda, snapshot only) every ${metricsRate.toHumanString()}`,
      schedule: events.Schedule.rate(metricsRate),
      targets: [
        new targets.LambdaFunction(this.purgeFunction, {
          event: events.RuleTargetInput.fromObject({ snapshotOnly: true }),
          retryAttempts: 0,
          maxEventAge: Duration.seconds(60),
        }),
      ],
    });

    // --- Migrations ----------------------------------------------------------------------------------------------
    if (props.migrations ?? true) {
      const migrationsDir = props.migrationsDir ?? DEFAULT_MIGRATIONS_DIR;
      const migrationSecret = db.migrationSecret ?? db.secret;
      const { role: migrateRole, logGroup: migrateLogs } = this.#executionRole("Migrate");
      this.#grantSecretRead(migrateRole, migrationSecret);
      this.migrateFunction = this.#function("Migrate", {
        entry: "functions/migrate/handler.ts",
        description: "Outbox migrations: applies migrations/*.sql at deploy time (custom resource)",
        role: migrateRole,
        logGroup: migrateLogs,
        // A migration that waits on a lock held by a long transaction should fail the deployment, not hang
        // it: 5 minutes, well under the provider framework's 15-minute invocation.
        timeout: Duration.minutes(5),
        memorySize: 256,
        environment: {
          ...this.#databaseEnv(migrationSecret),
          POWERTOOLS_SERVICE_NAME: `${props.serviceName ?? "outbox"}-migrate`,
        },
        // defaultMigrationsDir() looks for ./migrations beside the bundle (index.mjs).
        copyMigrationsFrom: migrationsDir,
      });
      const providerLogGroup = this.#logGroup("MigrationsProviderLogs");
      const providerRole = new iam.Role(this, "MigrationsProviderRole", {
        assumedBy: new iam.ServicePrincipal("lambda.amazonaws.com"),
        description:
          "CDK provider framework for the outbox migrations: invokes the migrate Lambda, writes logs",
        inlinePolicies: { logs: logsPolicy(providerLogGroup) },
      });
      const provider = new cr.Provider(this, "MigrationsProvider", {
        onEventHandler: this.migrateFunction,
        frameworkOnEventRole: providerRole,
        logGroup: providerLogGroup,
      });
      this.migrations = new CustomResource(this, "Migrations", {
        serviceToken: provider.serviceToken,
        resourceType: "Custom::OutboxMigrations",
        // The framework answers within the migrate Lambda's 5 minutes; CloudFormation's default wait for a
        // custom resource that never answers is an hour.
        serviceTimeout: Duration.minutes(10),
        properties: {
          // A new or changed file changes the hash, which makes CloudFormation send Update: migrations re-run.
          MigrationsHash: hashMigrations(migrationsDir),
          Schema: props.outboxSchema ?? "",
          Table: props.outboxTable ?? "",
        },
      });
      for (const dependency of db.readiness ?? []) this.migrations.node.addDependency(dependency);
      this.relayRule.node.addDependency(this.migrations);
      this.purgeRule.node.addDependency(this.migrations);
      this.metricsRule.node.addDependency(this.migrations);
      // cdk-nag v3 acknowledges exact findings; the IAM5 finding names the function's logical id.
      const migrateLogicalId = Stack.of(this).getLogicalId(
        this.migrateFunction.node.defaultChild as lambda.CfnFunction,
      );
      Validations.of(providerRole).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${migrateLogicalId}.Arn>:*]`,
        reason:
          "CDK's provider framework grants lambda:InvokeFunction on the migrate function and its versions " +
          "(<arn>:*); the wildcard covers only qualifiers of that one function.",
      });
    }

    // --- Alarms, dashboard ---------------------------------------------------------------------------------------
    const alarmProps = props.alarms ?? {};
    if (alarmProps.topic !== undefined) {
      this.alarmTopic = alarmProps.topic;
    } else if (alarmProps.createTopic === true) {
      // CloudWatch can publish to an encrypted topic only if it may use the key: the AWS-managed aws/sns key
      // cannot grant that, so the topic gets a key of its own.
      const key = new kms.Key(this, "AlarmTopicKey", {
        description: "Encrypts the outbox alarm topic",
        enableKeyRotation: true,
        removalPolicy,
      });
      key.addToResourcePolicy(
        new iam.PolicyStatement({
          sid: "AllowCloudWatchAlarmsToPublish",
          principals: [new iam.ServicePrincipal("cloudwatch.amazonaws.com")],
          actions: ["kms:Decrypt", "kms:GenerateDataKey*"],
          // In a key policy "*" means this key; AWS accepts nothing else there.
          resources: ["*"],
          conditions: { StringEquals: { "aws:SourceAccount": Stack.of(this).account } },
        }),
      );
      this.alarmTopic = new sns.Topic(this, "AlarmTopic", {
        displayName: "Outbox relay alarms",
        masterKey: key,
        enforceSSL: true,
      });
    }
    this.alarms = this.#createAlarms(alarmProps, metricsRate, tuning.strictOrder === true);
    if (this.alarmTopic !== undefined) {
      const action = new cloudwatchActions.SnsAction(this.alarmTopic);
      for (const alarm of Object.values(this.alarms)) {
        alarm.addAlarmAction(action);
        alarm.addOkAction(action);
      }
    }
    if (props.dashboard ?? true) this.dashboard = this.#createDashboard(metricsRate, purgeRate);
  }

  /** One of the construct's EMF metrics, with the `service` dimension Powertools adds. */
  metric(
    metricName: string,
    source: "relay" | "purge",
    options: { statistic?: string; period?: Duration } = {},
  ): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: this.metricsNamespace,
      metricName,
      dimensionsMap: { service: source === "relay" ? this.relayServiceName : this.purgeServiceName },
      statistic: options.statistic ?? "Sum",
      period: options.period ?? Duration.minutes(1),
    });
  }

  #databaseEnv(secret: secretsmanager.ISecret): Record<string, string> {
    const p = this.#props;
    // The ARN only: the Lambdas fetch the secret at run time (and again after a rotation); no credential is
    // ever placed in an environment variable.
    return {
      DATABASE_SECRET_ARN: secret.secretArn,
      ...(p.database.databaseName === undefined ? {} : { DATABASE_NAME: p.database.databaseName }),
      ...(p.outboxSchema === undefined ? {} : { OUTBOX_SCHEMA: p.outboxSchema }),
      ...(p.outboxTable === undefined ? {} : { OUTBOX_TABLE: p.outboxTable }),
    };
  }

  #logGroup(id: string): logs.LogGroup {
    return new logs.LogGroup(this, id, {
      retention: this.#props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: this.#props.removalPolicy ?? RemovalPolicy.RETAIN,
    });
  }

  /**
   * An execution role written out instead of the AWS managed policies (AWSLambdaBasicExecutionRole,
   * AWSLambdaVPCAccessExecutionRole), whose log permissions cover every log group in the account.
   */
  #executionRole(name: string): { role: iam.Role; logGroup: logs.LogGroup } {
    const logGroup = this.#logGroup(`${name}Logs`);
    const role = new iam.Role(this, `${name}Role`, {
      assumedBy: new iam.ServicePrincipal("lambda.amazonaws.com"),
      description: `Outbox ${name.toLowerCase()} Lambda`,
      inlinePolicies: {
        logs: logsPolicy(logGroup),
        vpc: new iam.PolicyDocument({
          statements: [
            new iam.PolicyStatement({
              sid: "ManageVpcNetworkInterfaces",
              actions: [
                "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSubnets",
                "ec2:DeleteNetworkInterface",
                "ec2:AssignPrivateIpAddresses",
                "ec2:UnassignPrivateIpAddresses",
              ],
              // Lambda creates the function's ENIs with this role before any ENI exists, and the Describe
              // actions support no resource-level permissions: AWS's own AWSLambdaVPCAccessExecutionRole uses
              // "*" here too.
              resources: ["*"],
            }),
          ],
        }),
      },
    });
    Validations.of(role).acknowledge({
      id: "AwsSolutions-IAM5[Resource::*]",
      reason:
        "EC2 network-interface actions for a VPC Lambda: Describe* support no resource-level permissions and " +
        "Lambda manages the ENIs before their ARNs exist (same statement as AWSLambdaVPCAccessExecutionRole).",
    });
    return { role, logGroup };
  }

  #grantSecretRead(role: iam.Role, secret: secretsmanager.ISecret) {
    // GetSecretValue only (grantRead adds DescribeSecret, which no handler calls). A secret known only by a
    // partial ARN needs the 6-character suffix wildcard that Secrets Manager appends.
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ["secretsmanager:GetSecretValue"],
        resources: [secret.secretFullArn ?? `${secret.secretArn}-??????`],
      }),
    );
    secret.encryptionKey?.grantDecrypt(
      new kms.ViaServicePrincipal(`secretsmanager.${Stack.of(this).region}.amazonaws.com`, role),
    );
  }

  #function(
    name: string,
    options: {
      entry: string;
      description: string;
      role: iam.Role;
      logGroup: logs.LogGroup;
      timeout: Duration;
      memorySize: number;
      environment: Record<string, string>;
      reservedConcurrency?: number | undefined;
      copyMigrationsFrom?: string;
    },
  ): nodejs.NodejsFunction {
    const db = this.#props.database;
    const copy = options.copyMigrationsFrom;
    return new nodejs.NodejsFunction(this, `${name}Function`, {
      entry: join(PROJECT_ROOT, options.entry),
      handler: "handler",
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
      description: options.description,
      runtime: lambda.Runtime.NODEJS_24_X,
      // Graviton: about 20% cheaper per GB-second than x86, and nothing here is native code.
      architecture: lambda.Architecture.ARM_64,
      role: options.role,
      timeout: options.timeout,
      memorySize: options.memorySize,
      environment: {
        ...options.environment,
        // Stack traces point into the TypeScript sources instead of the minified bundle. Node 24 reads the map
        // only when an Error's stack is formatted, not at start.
        NODE_OPTIONS: "--enable-source-maps",
      },
      ...(options.reservedConcurrency === undefined
        ? {}
        : { reservedConcurrentExecutions: options.reservedConcurrency }),
      logGroup: options.logGroup,
      vpc: db.vpc,
      ...(db.vpcSubnets === undefined ? {} : { vpcSubnets: db.vpcSubnets }),
      securityGroups: this.securityGroups,
      bundling: {
        // Local esbuild from node_modules, never Docker (none runs on the build machines).
        forceDockerBundling: false,
        format: nodejs.OutputFormat.ESM,
        target: "node24",
        mainFields: ["module", "main"],
        minify: true,
        sourceMap: true,
        sourcesContent: false,
        // ESM output for CommonJS dependencies (pg): give them a `require`.
        banner:
          "import { createRequire as __outboxCreateRequire } from 'node:module'; " +
          "const require = __outboxCreateRequire(import.meta.url);",
        // The SDK is bundled at the versions package-lock.json pins rather than taken from the runtime, whose
        // copy changes under us when AWS updates it: what the tests ran is what runs. Minified and tree-shaken
        // it adds ~400 KB (the relay bundle is ~450 KB), and a bundled SDK starts no slower than the runtime's.
        bundleAwsSDK: true,
        ...(copy === undefined
          ? {}
          : {
              commandHooks: {
                beforeBundling: () => [],
                beforeInstall: () => [],
                afterBundling: (_inputDir: string, outputDir: string) => [
                  `cp -R ${shellQuote(copy)} ${shellQuote(join(outputDir, "migrations"))}`,
                ],
              },
            }),
      },
    });
  }

  #createAlarms(
    props: OutboxAlarmProps,
    metricsRate: Duration,
    strictOrder: boolean,
  ): Record<string, cloudwatch.Alarm> {
    // The gauges (pending, oldest age, dead letters, blocked) come from the purge Lambda's snapshot, once per
    // metrics tick: a shorter alarm period would see gaps. With the 1-minute default, "for 2 minutes" is 2
    // periods; with a slower metrics schedule, at least 1 period.
    const gaugePeriod = metricsRate;
    const gaugePeriods = Math.max(1, Math.ceil(120 / gaugePeriod.toSeconds()));
    const see = "Runbook: docs/deploy.md#runbook";
    const alarms: Record<string, cloudwatch.Alarm> = {};

    alarms.oldestPendingAge = new cloudwatch.Alarm(this, "OldestPendingAgeAlarm", {
      alarmDescription:
        "The oldest unpublished outbox event is older than the threshold: the relay is not running, cannot reach " +
        `the database or SQS, or one aggregate is stuck behind retries. ${see}`,
      metric: this.metric("OldestPendingAgeSeconds", "purge", { statistic: "Maximum", period: gaugePeriod }),
      // 900 s: with the default backoff (1 s doubling to a 300 s cap, 10 attempts) a poison event retries for
      // about 1+2+4+...+256+300 = 811 s before it is dead-lettered; 15 minutes lets that run its course (the
      // dead-letter alarm reports it) while a stopped relay still alarms within the quarter hour.
      threshold: props.oldestPendingAgeSeconds ?? 900,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: gaugePeriods,
      treatMissingData: cloudwatch.TreatMissingData.MISSING,
    });
    alarms.pendingBacklog = new cloudwatch.Alarm(this, "PendingBacklogAlarm", {
      alarmDescription: `More than the threshold of outbox events are waiting to be published. ${see}`,
      metric: this.metric("PendingEvents", "purge", { statistic: "Maximum", period: gaugePeriod }),
      threshold: props.pendingEvents ?? 1000,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: gaugePeriods,
      treatMissingData: cloudwatch.TreatMissingData.MISSING,
    });
    alarms.deadLetters = new cloudwatch.Alarm(this, "DeadLettersAlarm", {
      alarmDescription:
        "Outbox events were dead-lettered (SQS rejected them max-attempts times, or the row is malformed). " +
        `They stay parked until redriven or purged. ${see}`,
      metric: this.metric("DeadLetters", "purge", { statistic: "Maximum", period: gaugePeriod }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.MISSING,
    });
    if (strictOrder) {
      alarms.blockedAggregates = new cloudwatch.Alarm(this, "BlockedAggregatesAlarm", {
        alarmDescription: `Strict order: aggregates are blocked behind a dead letter and publish nothing. ${see}`,
        metric: this.metric("BlockedAggregates", "purge", { statistic: "Maximum", period: gaugePeriod }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.MISSING,
      });
    }
    alarms.batchDuration = new cloudwatch.Alarm(this, "BatchDurationAlarm", {
      alarmDescription:
        "p95 of one relay round (claim, publish, record) is above the threshold in 3 of 5 minutes: SQS or the " +
        `database is slow. A round over 20 s hits the publish/statement timeouts. ${see}`,
      metric: this.metric("BatchDuration", "relay", { statistic: "p95" }),
      threshold: props.batchDurationP95Ms ?? 5000,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
      // No rounds, no data: an idle relay is not a slow one.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarms.relayErrors = new cloudwatch.Alarm(this, "RelayErrorsAlarm", {
      alarmDescription:
        "Relay invocations failed (the handler fails only when no round succeeded: database or secret " +
        `unreachable, bad configuration) in 2 of 3 minutes. ${see}`,
      metric: this.relayFunction.metricErrors({ period: Duration.minutes(1), statistic: "Sum" }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarms.relayThrottles = new cloudwatch.Alarm(this, "RelayThrottlesAlarm", {
      alarmDescription:
        "The relay was throttled. Its timeout and reserved concurrency admit exactly the scheduled overlap, so " +
        `a throttle means extra invocations or an account concurrency limit. ${see}`,
      metric: this.relayFunction.metricThrottles({ period: Duration.minutes(5), statistic: "Sum" }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarms.purgeErrors = new cloudwatch.Alarm(this, "PurgeErrorsAlarm", {
      alarmDescription:
        "The purge Lambda failed (a purge, or a snapshot-only run): old rows may not be deleted and the backlog " +
        `metrics above may be stale. ${see}`,
      // 5 minutes: a failing database fails every snapshot tick; an hourly purge failure shows for one period.
      metric: this.purgeFunction.metricErrors({ period: Duration.minutes(5), statistic: "Sum" }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (this.consumerDeadLetterQueue !== undefined) {
      alarms.consumerDeadLetters = new cloudwatch.Alarm(this, "ConsumerDeadLettersAlarm", {
        alarmDescription:
          "A consumer failed a message maxReceiveCount times and SQS moved it to the consumer dead-letter " +
          `queue (this is the consumers' side, not the relay's). ${see}`,
        metric: this.consumerDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
          period: Duration.minutes(5),
          statistic: "Maximum",
        }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    }
    return alarms;
  }

  #createDashboard(metricsRate: Duration, purgeRate: Duration): cloudwatch.Dashboard {
    const gauge = (name: string) => this.metric(name, "purge", { statistic: "Maximum", period: metricsRate });
    const perPurge = (name: string) => this.metric(name, "purge", { statistic: "Sum", period: purgeRate });
    const relay = (name: string, statistic = "Sum") => this.metric(name, "relay", { statistic });
    const width = 8;
    return new cloudwatch.Dashboard(this, "Dashboard", {
      defaultInterval: Duration.hours(6),
      widgets: [
        [
          new cloudwatch.GraphWidget({
            title: "Backlog (from the purge)",
            width,
            left: [gauge("PendingEvents"), gauge("DeadLetters"), gauge("BlockedAggregates")],
            right: [gauge("OldestPendingAgeSeconds")],
          }),
          new cloudwatch.GraphWidget({
            title: "Relay throughput per minute",
            width,
            left: [relay("EventsPublished"), relay("PublishFailures"), relay("EventsDeadLettered")],
          }),
          new cloudwatch.GraphWidget({
            title: "Relay latency (ms)",
            width,
            left: [relay("BatchDuration", "p95"), relay("PublishLag", "p95"), relay("PublishLag", "Maximum")],
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: "Relay Lambda",
            width,
            left: [this.relayFunction.metricInvocations(), this.relayFunction.metricErrors()],
            right: [this.relayFunction.metricThrottles()],
          }),
          new cloudwatch.GraphWidget({
            title: "Relay Lambda duration (ms)",
            width,
            left: [this.relayFunction.metricDuration({ statistic: "Maximum" })],
          }),
          new cloudwatch.GraphWidget({
            title: "Purge",
            width,
            left: [perPurge("PurgedRows"), this.purgeFunction.metricErrors({ period: metricsRate })],
            right: [this.metric("PurgeDuration", "purge", { statistic: "Maximum", period: purgeRate })],
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: "Queue",
            width,
            left: [
              this.queue.metricApproximateNumberOfMessagesVisible(),
              this.queue.metricApproximateAgeOfOldestMessage(),
            ],
            right: [
              ...(this.consumerDeadLetterQueue === undefined
                ? []
                : [this.consumerDeadLetterQueue.metricApproximateNumberOfMessagesVisible()]),
            ],
          }),
          new cloudwatch.AlarmStatusWidget({
            title: "Alarms",
            width: 16,
            alarms: Object.values(this.alarms),
          }),
        ],
      ],
    });
  }
}

function logsPolicy(logGroup: logs.ILogGroup): iam.PolicyDocument {
  return new iam.PolicyDocument({
    statements: [
      new iam.PolicyStatement({
        actions: ["logs:CreateLogStream", "logs:PutLogEvents"],
        // The log group's ARN attribute ends in ":*", which covers its streams and nothing else.
        resources: [logGroup.logGroupArn],
      }),
    ],
  });
}

function wholeMinutes(duration: Duration, name: string): Duration {
  const seconds = duration.toSeconds();
  if (seconds % 60 !== 0 || seconds < 60 || seconds > 86_400) {
    throw new Error(`OutboxRelay: ${name} must be whole minutes, from 1 minute to 1 day`);
  }
  return duration;
}

function wholeHours(duration: Duration, name: string): number {
  const hours = duration.toSeconds() / 3600;
  if (!Number.isInteger(hours) || hours < 1) throw new Error(`OutboxRelay: ${name} must be whole hours`);
  return hours;
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
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
