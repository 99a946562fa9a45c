import { type CustomResource, Duration, RemovalPolicy } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import type * as ec2 from "aws-cdk-lib/aws-ec2";
import type * as events from "aws-cdk-lib/aws-events";
import type * as iam from "aws-cdk-lib/aws-iam";
import type * as kms from "aws-cdk-lib/aws-kms";
import type * as lambda from "aws-cdk-lib/aws-lambda";
import * as logs from "aws-cdk-lib/aws-logs";
import type * as rds from "aws-cdk-lib/aws-rds";
import type * as s3 from "aws-cdk-lib/aws-s3";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { Construct, Dependable, type IDependable } from "constructs";
import { DATABASE_SETTINGS, LOGIN_SETTINGS } from "../functions/shared/db/settings.ts";
import { DESTINATION_SETTINGS } from "../functions/shared/destinations/setting.ts";
import { DESTINATION_DIMENSION } from "../functions/shared/observe/metrics.ts";
import { METRICS_SETTINGS } from "../functions/shared/observe/settings.ts";
import type { OutboxLimits } from "../functions/shared/outbox/limits.ts";
import { DEFAULT_TABLE, OUTBOX_LOCATION_SETTINGS } from "../functions/shared/outbox/names.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../functions/shared/outbox/payloadPointer.ts";
import { PURGE_SETTINGS } from "../functions/shared/purge/settings.ts";
import { RELAY_SETTINGS } from "../functions/shared/relay/settings.ts";
import { checkIntegerOption } from "../functions/shared/util/env.ts";
import { createAlarms, type OutboxAlarmThresholds, type RoutedDestination } from "./alarms.ts";
import { alarmTopic, notifyTopic } from "./alarmTopic.ts";
import { consumerVisibilityTimeout, OutboxConsumer, type OutboxConsumerProps } from "./consumer.ts";
import { createDashboard } from "./dashboard.ts";
import { type ResolvedDatabase, resolveDatabase, withSecretKey } from "./database.ts";
import {
  createDestination,
  grantRelayPublish,
  restrictSendToRelay,
  SQS_MAX_MESSAGE_BYTES,
} from "./destination.ts";
import {
  alarmFoundConsumers,
  destinationConsumerPlaces,
  destinationConsumers,
} from "./destinationConsumers.ts";
import { environmentOf } from "./environment.ts";
import { checkEnvironmentSize } from "./environmentSize.ts";
import {
  executionRole,
  type FunctionPlacement,
  grantSecretRead,
  outboxFunction,
  PROJECT_ROOT,
} from "./lambdas.ts";
import { type LoginSecrets, loginSecrets, type OutboxLoginsProps } from "./logins.ts";
import { DEFAULT_MIGRATIONS_DIR, hashMigrations, MIGRATE_TIMEOUT, migrationsResource } from "./migrations.ts";
import { claimMetricsIdentity, DEFAULT_METRICS_NAMESPACE, defaultServicePrefix } from "./naming.ts";
import {
  type CreateEndpoints,
  createEndpointsOf,
  type EndpointService,
  functionSecurityGroups,
  withServiceEndpoints,
} from "./network.ts";
import { outboxLimits } from "./outboxLimits.ts";
import {
  grantPayloadReadTo,
  grantPayloadWrite,
  type LargePayloadsProps,
  type PayloadBucket,
  payloadBucket,
  s3Route,
} from "./payloadBucket.ts";
import {
  DEFAULT_BATCH_MAX_BYTES,
  DEFAULT_BUDGET_MARGIN_MS,
  DEFAULT_TARGET_EVENTS_PER_SECOND,
  relayMemory,
  relayReservedConcurrency,
  relayTiming,
} from "./relayTiming.ts";
import { endpointServices, grantRoutes, isBus, type OutboxRoute, resolveRoutes } from "./routes.ts";
import { dropStaleTicks, purgeRules, relayRule } from "./schedules.ts";

export type { OutboxRoute };
export { DEFAULT_MIGRATIONS_DIR, hashMigrations, PROJECT_ROOT, SQS_MAX_MESSAGE_BYTES };

export interface OutboxDatabaseProps {
  /**
   * Your Aurora cluster, created in this app or imported (`DatabaseCluster.fromDatabaseClusterAttributes`): its
   * port is opened to the Lambdas, the migrations wait for it, and its secret is the default `secret`.
   */
  readonly cluster?: rds.IDatabaseCluster;
  /** Your RDS instance instead of a cluster, with the same meaning. */
  readonly instance?: rds.IDatabaseInstance;
  /**
   * Secrets Manager secret with the credentials: the RDS format (username, password, host, port, dbname) or a
   * `postgres://` URL. Read at run time, never copied. Default: the `cluster`'s or `instance`'s secret (a
   * generated one, or the `secret` attribute of an imported one).
   */
  readonly secret?: secretsmanager.ISecret;
  /**
   * The customer managed KMS key the database secret (`secret`, or the cluster's or instance's) is encrypted with,
   * when the imported secret does not carry it (`Secret.fromSecretCompleteArn` carries no key). The roles that
   * read the secret get `kms:Decrypt` on it through Secrets Manager only (`kms:ViaService`), the logins' secrets are
   * encrypted with it, and their rotations get it for the master secret. Default: the secret's own `encryptionKey`
   * (a secret created in the app, or imported with `Secret.fromSecretAttributes({ encryptionKey })`), else none (AWS
   * managed `aws/secretsmanager`).
   */
  readonly secretEncryptionKey?: kms.IKey;
  /** Database name; default: the secret's `dbname`, else `postgres`. */
  readonly databaseName?: string;
  /** The database's VPC; the Lambdas run in it. */
  readonly vpc: ec2.IVpc;
  /** Subnets for the Lambdas; they need a route to SQS and Secrets Manager (NAT or VPC endpoints). */
  readonly vpcSubnets?: ec2.SubnetSelection;
  /**
   * Instead of `cluster` or `instance`: the database as a proxy or `new ec2.Connections({ securityGroups,
   * defaultPort })`; its default port is opened to the Lambdas' security group. Omit all three when
   * `securityGroups` already get in.
   */
  readonly connections?: ec2.IConnectable;
  /** Security groups for the Lambdas instead of the one this construct creates (e.g. one the database trusts). */
  readonly securityGroups?: ec2.ISecurityGroup[];
  /**
   * Interface endpoints (SQS, Secrets Manager) the Lambdas reach AWS through. Each is opened to the Lambdas'
   * security group, and the group this construct creates then has no other HTTPS egress.
   */
  readonly vpcEndpoints?: ec2.IConnectable[];
  /**
   * What the construct may add to the VPC: the interface endpoints `vpcEndpoints` lacks for the destinations'
   * services, and with `largePayloads` an S3 gateway endpoint. `openToVpc`: created, private DNS on, open to the
   * VPC's CIDR (every workload of the VPC keeps reaching the service). `functionsOnly`: created, admitting only the
   * Lambdas (other workloads of the VPC lose that service: for a VPC nothing else uses). `none`: nothing; give
   * each endpoint, and S3 a route of the VPC's own. Default `openToVpc` for a VPC created in this app, `none` for
   * an imported one (docs/deploy.md, "VPC endpoints").
   */
  readonly createEndpoints?: CreateEndpoints;
  /**
   * With a bus destination behind `vpcEndpoints`: the EventBridge interface endpoint the relay publishes through.
   * Default: one created as `createEndpoints` says; give yours if the VPC has one already (two endpoints of one
   * service with private DNS cannot share a VPC).
   */
  readonly eventBridgeEndpoint?: ec2.IInterfaceVpcEndpoint;
  /**
   * With `routes` behind `vpcEndpoints`: the interface endpoint of each service the routes publish through (`sqs`,
   * `sns`, `kinesis`, `events`). Default: one of `vpcEndpoints` this app made for that service, else one created
   * as `createEndpoints` says; give yours if the VPC has one already.
   */
  readonly routeEndpoints?: Partial<Record<EndpointService, ec2.IInterfaceVpcEndpoint>>;
  /**
   * Logins of their own for the relay and the purge (default on with `cluster` or `instance`, the migrations on,
   * and neither `relaySecret` nor `purgeSecret`): a generated secret each, attached to the database, whose login
   * the migrations custom resource creates in the outbox's role, rotated by AWS's multi-user rotation with
   * `secret` (the master user's) as its superuser. docs/deploy.md, "Database roles". `false`: the relay and the
   * purge use `relaySecret`, `purgeSecret` or `secret`.
   */
  readonly logins?: boolean | OutboxLoginsProps;
  /**
   * Secret the relay connects with: a login in this outbox's relay role (`outbox_relay:<database>.<schema>.<table>`,
   * recorded in `<prefix>_roles` by migrations/0009_no_back_doors.sql; docs/deploy.md, "Database roles"). Default
   * `secret`.
   */
  readonly relaySecret?: secretsmanager.ISecret;
  /** Secret the purge connects with: a login in this outbox's purge role (`outbox_purge:...`). Default `secret`. */
  readonly purgeSecret?: secretsmanager.ISecret;
  /** Secret used only by the deploy-time migrations, when the relay's user may not run DDL; default `secret`. */
  readonly migrationSecret?: secretsmanager.ISecret;
  /** What must be ready before migrations run. Default: the `cluster` (with its instances) or `instance`. */
  readonly readiness?: IDependable[];
  /**
   * What identifies the database beyond its secret (e.g. `cluster.clusterResourceIdentifier`): a change re-runs
   * the migrations, so a replaced or restored cluster is migrated before a relay polls it. Default: none.
   */
  readonly identity?: string;
  /** The secret's rotation Lambda (see `secretRotationFunctionName`): its errors alarm. */
  readonly rotationFunctionName?: string;
}

/** Relay tuning; unset values keep the handler's defaults (RELAY_SETTINGS, functions/shared/relay/settings.ts). */
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
  /**
   * What a published row becomes (OUTBOX_RETENTION). `keep` (default): marked, deleted by the purge after
   * `retentionHours`, so the table holds the published history for audit and replay. `delete`: deleted in the
   * relay's round, about a sixth of the relay's WAL and no published rows to purge (docs/cost.md, "Retention
   * modes"). Needs migration 0011; switch either way by redeploying.
   */
  readonly retention?: "keep" | "delete";
  /**
   * The destination queue's MaximumMessageSize, for a queue imported into this app (`fromQueueArn`), whose size
   * the construct cannot read. Default: the queue's own for one created in the app (1 MiB for the construct's;
   * 262,144 for a `new sqs.Queue` without `maxMessageSizeBytes`), else 262,144 with a synth warning. The relay
   * sends up to it, the write API refuses more (the outbox's limits row; docs/large-payloads.md, "Limits"), and
   * the relay's cold start checks the queue really takes it.
   */
  readonly maxMessageBytes?: number;
  /** Payload bytes one round may hold (RELAY_BATCH_MAX_BYTES). Default 16 MiB, the relay's own. Sizes the memory. */
  readonly batchMaxBytes?: number;
  /**
   * Rounds in flight at once per invocation, each on its own session (RELAY_PARALLEL_ROUNDS). Default 4, the
   * relay's own (functions/shared/relay.ts). Multiplies the sessions: see `maxRelaySessions`.
   */
  readonly parallelRounds?: number;
  /** Dwell mode's idle polling: from min after a busy round, doubling up to max (RELAY_IDLE_POLL_*_MS). */
  readonly idlePollMinMs?: number;
  readonly idlePollMaxMs?: number;
  /** Default 10 000. Part of the round reserve, so it also sizes the Lambda timeout. */
  readonly publishTimeoutMs?: number;
  /** Default 5 000. Part of the round reserve, so it also sizes the Lambda timeout. */
  readonly statementTimeoutMs?: number;
  /** Default 5 000: stop claiming this long before the Lambda deadline. */
  readonly budgetMarginMs?: number;
  /** Wake on LISTEN/NOTIFY (needs the notify trigger; pins RDS Proxy sessions). Default false. */
  readonly listen?: boolean;
  /**
   * Dwell mode: an invocation that claimed nothing for this long returns, and the next tick resumes (the first
   * event after a quiet spell then waits up to a tick). Default unset: dwell until handed over or the budget ends.
   */
  readonly idleStopMs?: number;
  /**
   * Dwell mode: how long a new invocation claims, without a failed round, before the one before it hands over
   * (`RELAY_HANDOVER_PROVING_MS`). Default 5 000. A successor that dies within it leaves its predecessor claiming;
   * each tick's overlap grows by it. Part of the dwell cap, so it also sizes the Lambda timeout.
   */
  readonly handoverProvingMs?: number;
  /**
   * Default: enough for the byte budget's rounds (448 MB with the defaults; a smaller value is refused) and for
   * `targetEventsPerSecond` (384 MB for the default 1,000); relayMemory in relayTiming.ts. 448 MB by default.
   */
  readonly memorySize?: number;
  /**
   * Events/s one relay invocation should reach, which sizes its memory (Lambda's CPU share is proportional to it).
   * Default 1,000, above what most outboxes carry (3,000, an SQS FIFO queue's rate without high-throughput mode, is
   * 1,024 MB); at most 6,000 (what one invocation
   * reached on a whole vCPU: more takes more `relays`). docs/cost.md prices it.
   */
  readonly targetEventsPerSecond?: number;
  /**
   * Default: nothing reserved. Lambda keeps part of the account's concurrency unreserved, so a reservation fails
   * the deploy (CREATE_FAILED) in an account whose quota is 10, as new accounts' is. `true` reserves what the
   * schedule can start at once (relays x 4 for a 1-minute schedule; relayTiming.ts), which makes anything beyond
   * (a manual invoke, a duplicate delivery) a throttle instead of an extra session-holding invocation. A number
   * below that is refused at synth: it would throttle legal overlaps and leave minutes without a relay.
   */
  readonly reservedConcurrency?: number | boolean;
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
  /**
   * Default 10 000, the purge's own (functions/shared/purge/settings.ts says why): stop starting DELETE batches
   * this long (plus one statement timeout) before the deadline.
   */
  readonly budgetMarginMs?: number;
  /** Default: nothing reserved (see the relay's). `true` reserves 2: a purge and a snapshot may overlap. */
  readonly reservedConcurrency?: number | boolean;
}

export interface OutboxAlarmProps extends OutboxAlarmThresholds {
  /**
   * Send ALARM and OK notifications to this topic. Its policy must allow cloudwatch.amazonaws.com to publish (a
   * topic policy replaces SNS's default one) and, if it is encrypted, its key must let CloudWatch use it.
   */
  readonly topic?: sns.ITopic;
  /**
   * Create a KMS-encrypted, TLS-only topic for the alarms whose policy and key let this account's alarms publish
   * (ignored when `topic` is given). Default false.
   */
  readonly createTopic?: boolean;
}

export interface OutboxRelayProps {
  readonly database: OutboxDatabaseProps;
  /**
   * Where the relay publishes: an existing SQS FIFO queue, or an EventBridge bus (the relay gets
   * events:PutEvents on that bus only; what consumers can rely on differs, see docs/eventbridge.md). Default: a
   * FIFO queue created here (high throughput, 1 MiB, TLS only).
   */
  readonly destination?: sqs.IQueue | events.IEventBus;
  /** The same as `destination` with a queue (the older name); set one of the two. */
  readonly queue?: sqs.IQueue;
  /**
   * Where each event goes, by its aggregate and event type: the first route whose `match` takes it (`aggregateType`
   * and/or `eventType`, each a pattern or a list, `*` a wildcard; a field left out matches every value). Events
   * no route takes go to `destination` (or `queue`), or, without one, are dead-lettered "no route". Each route's
   * `destination` is an SQS queue (FIFO or standard), an SNS topic (FIFO or standard), a Kinesis stream or an
   * EventBridge bus; the relay gets exactly the actions it uses on each (docs/deploy.md, "Routing"). Checked at
   * synth by the relay's own parser: an unreachable or duplicate route, or a `.fifo` mismatch, fails `cdk synth`
   * naming `routes[index]`. With routes and no `destination`, no queue is created.
   */
  readonly routes?: readonly OutboxRoute[];
  /** With a bus destination or bus routes: the events' `source`. Default `outbox-relay`; not `aws.`-prefixed. */
  readonly eventSource?: string;
  /** Encrypt the created queues with this key instead of SQS-managed keys (SSE-SQS). */
  readonly queueEncryptionKey?: kms.IKey;
  /**
   * Name of the queue the construct creates (must end in `.fifo`). Default: derived from the construct's path,
   * the same for every stack of that name, so a stack created again after `cdk destroy` collides with the
   * retained queue; a name carrying `stackCreationSuffix()` (infra/naming.ts) does not. Changing the name of a
   * deployed queue replaces it.
   */
  readonly queueName?: string;
  /**
   * Deny sqs:SendMessage on the created queue to every principal but the relay's role (and `redriveRoles`), and on
   * its consumer dead-letter queue to everyone. Default false.
   */
  readonly restrictSendToRelay?: boolean;
  /**
   * With `restrictSendToRelay`: the roles that may redrive the consumer dead-letter queue into the queue (a
   * message move task sends as its caller). Each is exempt from the Deny and granted the move's actions.
   */
  readonly redriveRoles?: iam.IRole[];
  /** Receives after which a consumer's message moves to the created dead-letter queue. Default 5. */
  readonly consumerMaxReceiveCount?: number;
  /**
   * Visibility timeout of the created queue: how long a consumer has per message. Default 30 s; with `consumer`,
   * 6 x its timeout (180 s for the default 30 s), as AWS advises for a Lambda event source.
   */
  readonly consumerVisibilityTimeout?: Duration;
  readonly outboxSchema?: string;
  readonly outboxTable?: string;
  /**
   * Prefix of the Powertools service names `<prefix>-relay`, `<prefix>-purge`: the `service` dimension of the
   * metrics. Default `<stack name>-<construct path>`, unique per instance in an account and region.
   */
  readonly serviceName?: string;
  /** CloudWatch namespace of the EMF metrics. Default `OutboxRelay`. */
  readonly metricsNamespace?: string;
  /** How often the relay is started. Default 1 minute (EventBridge's finest rate). */
  readonly relaySchedule?: Duration;
  /** Relay invocations started per tick, 1 to 5 (one rule, one target each). Default 1. */
  readonly relays?: number;
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
  /**
   * Removal policy of the queues, log groups and payload bucket. Default RETAIN_ON_UPDATE_OR_DELETE
   * (DeletionPolicy RetainExceptOnCreate): kept on stack deletion or replacement, as they may hold undelivered
   * events and evidence, but deleted when the deploy that created them rolls back, so a failed first deploy
   * leaves nothing behind to collide with its retry ("already exists" on the queue's name).
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Payloads too large for the destination go through S3 in the AWS Extended Client format (the claim check,
   * docs/large-payloads.md). Opt-in; `{}` creates the bucket. The table's payload limit is raised separately.
   */
  readonly largePayloads?: LargePayloadsProps;
  /**
   * Also create a consumer Lambda reading the queue (infra/consumer.ts); its alarms go to the alarm topic. With a
   * given queue, `deadLetterQueue` is the one its consumer's failures land in, alarmed on (default: the queue's
   * own, when it is a queue of this app that has one); the created queue's dead-letter queue is alarmed already.
   */
  readonly consumer?: Omit<OutboxConsumerProps, "queue" | "queueVisibilityTimeout" | "maxReceiveCount">;
}

/**
 * The outbox relay for one outbox table: the SQS FIFO queue (or an existing one), the relay and purge Lambdas
 * on their schedules, deploy-time migrations that every function waits for, alarms and a dashboard. The parts
 * live beside this file, one concern each: destination, network, lambdas, schedules, migrations, alarms,
 * dashboard, relayTiming (the arithmetic).
 */
export class OutboxRelay extends Construct {
  /** The queue the relay publishes to by default (undefined with a bus, or with routes and no `destination`). */
  readonly queue?: sqs.IQueue;
  /** The bus the relay publishes to (undefined with a queue). */
  readonly eventBus?: events.IEventBus;
  /** The dead-letter queue of the created queue's consumers (undefined for an existing queue). */
  readonly consumerDeadLetterQueue?: sqs.IQueue;
  readonly relayFunction: lambda.Function;
  readonly purgeFunction: lambda.Function;
  readonly migrateFunction?: lambda.Function;
  /** The migrations custom resource; the relay and purge functions and their schedules are created after it. */
  readonly migrations?: CustomResource;
  /** The EventBridge rules that start the relay(s), the purge, and the purge's snapshot-only runs. */
  readonly relayRule: events.Rule;
  readonly purgeRule: events.Rule;
  readonly metricsRule: events.Rule;
  /** Security groups of the Lambdas (created here unless given). */
  readonly securityGroups: ec2.ISecurityGroup[];
  readonly alarms: Record<string, cloudwatch.Alarm>;
  readonly alarmTopic?: sns.ITopic;
  readonly dashboard?: cloudwatch.Dashboard;
  readonly metricsNamespace: string;
  readonly consumer?: OutboxConsumer;
  /** The bucket of payloads sent through S3 (with `largePayloads`). */
  readonly payloadBucket?: s3.IBucket;
  /**
   * The outbox's limits row as the migrations write it at deploy time (infra/outboxLimits.ts): what the write API
   * checks events against. With `migrations: false`, write it yourself (`outbox migrate --max-message-bytes`...).
   */
  readonly outboxLimits: OutboxLimits;
  readonly relayServiceName: string;
  readonly purgeServiceName: string;
  /**
   * The most database sessions the relays can hold at once: relays x the invocations of one target the schedule
   * can overlap (4 for a 1-minute schedule) x (parallel rounds + 1 with LISTEN). 16 with the defaults, 80 with
   * `relays: 5`. Size max_connections (or the proxy's pool) for it, plus the purge's 2 and the migrations' 1.
   */
  readonly maxRelaySessions: number;

  /** The secret the Lambdas read the database credentials from (given, or the cluster's or instance's). */
  readonly databaseSecret: secretsmanager.ISecret;
  /** The relay's generated login (database.logins), if the construct made one. */
  readonly relayLoginSecret?: secretsmanager.ISecret;
  /** The purge's generated login (database.logins), if the construct made one. */
  readonly purgeLoginSecret?: secretsmanager.ISecret;

  readonly #props: OutboxRelayProps;
  readonly #database: ResolvedDatabase;
  readonly #payloads: PayloadBucket | undefined;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    this.#props = props;
    const db = props.database;
    const database = withSecretKey(this, resolveDatabase(db), db.secretEncryptionKey);
    this.#database = database;
    this.databaseSecret = database.secret;
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE;
    const servicePrefix = props.serviceName ?? defaultServicePrefix(this);
    this.metricsNamespace = props.metricsNamespace ?? DEFAULT_METRICS_NAMESPACE;
    claimMetricsIdentity(this, this.metricsNamespace, servicePrefix);
    this.relayServiceName = `${servicePrefix}-relay`;
    this.purgeServiceName = `${servicePrefix}-purge`;

    if (props.destination !== undefined && props.queue !== undefined) {
      throw new Error("OutboxRelay: set destination or queue, not both");
    }
    const target = props.destination ?? props.queue;
    const routes =
      props.routes === undefined ? undefined : resolveRoutes(this, props.routes, props.eventSource);
    // With routes, the default destination is optional: no queue is created when none is given.
    const destination =
      routes !== undefined && target === undefined
        ? undefined
        : createDestination(this, {
            target,
            // A bus route takes the source too; a default that is no bus then ignores it.
            eventSource:
              routes !== undefined && !(target !== undefined && isBus(target))
                ? undefined
                : props.eventSource,
            queueEncryptionKey: props.queueEncryptionKey,
            consumerMaxReceiveCount: props.consumerMaxReceiveCount,
            // With a consumer of ours on it, the queue gets the 6x the consumer's timeout its construct checks for.
            consumerVisibilityTimeout:
              props.consumerVisibilityTimeout ??
              (props.consumer === undefined ? undefined : consumerVisibilityTimeout(props.consumer.timeout)),
            queueName: props.queueName,
            removalPolicy,
          });
    if (routes !== undefined && props.eventSource !== undefined) {
      if (
        destination?.kind !== "eventbridge" &&
        !routes.places.some((place) => place.kind === "eventbridge")
      ) {
        throw new Error("OutboxRelay: eventSource applies only to an EventBridge bus destination or route");
      }
    }
    if (destination?.kind === "eventbridge") {
      this.eventBus = destination.eventBus;
    } else if (destination !== undefined) {
      this.queue = destination.queue;
      if (destination.consumerDeadLetterQueue !== undefined) {
        this.consumerDeadLetterQueue = destination.consumerDeadLetterQueue;
      }
    }

    const vpcEndpoints = withServiceEndpoints(this, db, endpointServices(destination?.kind, routes));
    this.securityGroups = functionSecurityGroups(this, {
      ...db,
      vpcEndpoints,
      connections: database.connections,
    });
    const payloads =
      props.largePayloads === undefined ? undefined : payloadBucket(this, props.largePayloads, removalPolicy);
    this.#payloads = payloads;
    if (payloads !== undefined) {
      this.payloadBucket = payloads.bucket;
      s3Route(this, {
        vpc: db.vpc,
        subnets: db.vpcSubnets,
        groups: this.securityGroups,
        behindEndpoints: vpcEndpoints !== undefined && vpcEndpoints.length > 0,
        create: createEndpointsOf(db),
      });
    }
    const placement: FunctionPlacement = {
      vpc: db.vpc,
      vpcSubnets: db.vpcSubnets,
      securityGroups: this.securityGroups,
      logRetention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy,
    };

    // --- Logins of the relay and the purge: generated secrets; the migrations make the logins ------------------
    const logins = this.#logins(props, database, vpcEndpoints ?? []);
    if (logins !== undefined) {
      this.relayLoginSecret = logins.relay;
      this.purgeLoginSecret = logins.purge;
    }

    // --- The write API's limits: the destinations' and largePayloads', written by the migrations --------------
    if (destination?.kind !== "sqs-fifo" && props.relay?.maxMessageBytes !== undefined) {
      throw new Error(
        "OutboxRelay relay.maxMessageBytes applies only to a queue destination (the default): a bus's limit is " +
          "fixed, and a route takes its own maxMessageBytes",
      );
    }
    const maxMessageBytes = props.relay?.maxMessageBytes ?? destination?.defaultMaxMessageBytes ?? 0;
    this.outboxLimits = outboxLimits(this, {
      destination,
      destinationMaxMessageBytes: maxMessageBytes,
      destinationSizeGiven: props.relay?.maxMessageBytes !== undefined,
      routes,
      largePayloads: props.largePayloads,
    });

    // --- Migrations first: everything that touches the outbox depends on them -----------------------------------
    if (props.migrations ?? true) {
      const migrationsDir = props.migrationsDir ?? DEFAULT_MIGRATIONS_DIR;
      const migrationSecret = db.migrationSecret ?? database.secret;
      const { role, logGroup } = executionRole(this, "Migrate", placement);
      grantSecretRead(this, role, migrationSecret);
      if (logins !== undefined) {
        grantSecretRead(this, role, logins.relay);
        grantSecretRead(this, role, logins.purge);
      }
      this.migrateFunction = outboxFunction(this, "Migrate", placement, {
        code: "migrate",
        description: "Outbox migrations: applies migrations/*.sql at deploy time (custom resource)",
        role,
        logGroup,
        // Lock waits are bounded by the runner's lock_timeout and retries (functions/shared/migrate.ts, ~2 min at
        // most); a concurrent index build grows with the table: infra/migrations.ts has the figures.
        timeout: MIGRATE_TIMEOUT,
        memorySize: 256,
        environment: {
          ...this.#databaseEnv(migrationSecret),
          [METRICS_SETTINGS.serviceName.env]: `${servicePrefix}-migrate`,
          ...environmentOf("OutboxRelay", [
            ["database.logins", LOGIN_SETTINGS.relaySecretArn, logins?.relay.secretArn],
            ["database.logins", LOGIN_SETTINGS.purgeSecretArn, logins?.purge.secretArn],
          ]),
        },
        // defaultMigrationsDir() looks for ./migrations beside the bundle (index.mjs).
        migrationsDir,
      });
      this.migrations = migrationsResource(this, {
        migrateFunction: this.migrateFunction,
        migrationsDir,
        database: {
          secretArn: migrationSecret.secretArn,
          name: db.databaseName ?? "",
          identity: db.identity ?? "",
        },
        schema: props.outboxSchema ?? "",
        table: props.outboxTable ?? "",
        readiness: database.readiness,
        // Every group a rule of the migrate Lambda's paths hangs under: ours, the database's, the endpoints'.
        network: [
          ...this.securityGroups,
          ...(database.connections?.connections.securityGroups ?? []),
          ...(vpcEndpoints ?? []).flatMap((endpoint) => endpoint.connections.securityGroups),
        ],
        placement,
        loginSecretArns: logins === undefined ? [] : [logins.relay.secretArn, logins.purge.secretArn],
        limits: this.outboxLimits,
      });
      // A rotation's createSecret reads the login's current credentials, which exist once the migrations ran.
      for (const schedule of logins?.schedules ?? []) {
        for (const root of Dependable.of(schedule).dependencyRoots) root.node.addDependency(this.migrations);
      }
    }

    // --- Relay ---------------------------------------------------------------------------------------------------
    const tuning = props.relay ?? {};
    const relaySecret = db.relaySecret ?? logins?.relay ?? database.secret;
    const relayRate = props.relaySchedule ?? Duration.minutes(1);
    const relays = props.relays ?? 1;
    const budgetMarginMs = tuning.budgetMarginMs ?? DEFAULT_BUDGET_MARGIN_MS;
    // The memory holds rounds of the largest message any destination takes.
    const largestMessageBytes = Math.max(maxMessageBytes, routes?.maxMessageBytes ?? 0);
    const R = RELAY_SETTINGS;
    const batchMaxBytes = tuning.batchMaxBytes ?? DEFAULT_BATCH_MAX_BYTES;
    const parallelRounds = tuning.parallelRounds ?? R.parallelRounds.default;
    const { min: minRounds, max: maxRounds } = R.parallelRounds;
    checkIntegerOption("OutboxRelay relay.parallelRounds", parallelRounds, minRounds, maxRounds);
    // At least one message: a round always loads its first row, whatever its size.
    checkIntegerOption(
      "OutboxRelay relay.batchMaxBytes",
      batchMaxBytes,
      largestMessageBytes,
      R.batchMaxBytes.max,
    );
    // With largePayloads one round at a time may load a payload of maxPayloadBytes past its budget: the round
    // reserve, and so the Lambda timeout, make room for it (relayTiming, functions/shared/relay/loadBudget.ts).
    const timing = relayTiming({
      scheduleSeconds: relayRate.toSeconds(),
      relays,
      budgetMarginMs,
      ...(tuning.publishTimeoutMs === undefined ? {} : { publishTimeoutMs: tuning.publishTimeoutMs }),
      ...(tuning.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: tuning.statementTimeoutMs }),
      ...(tuning.handoverProvingMs === undefined ? {} : { handoverProvingMs: tuning.handoverProvingMs }),
      batchMaxBytes,
      maxMessageBytes: Math.max(
        largestMessageBytes,
        props.largePayloads === undefined
          ? 0
          : (props.largePayloads.maxPayloadBytes ?? MAX_PAYLOAD_BYTES_LIMIT),
      ),
    });
    if (tuning.idlePollMaxMs !== undefined) {
      const min = tuning.idlePollMinMs ?? R.idlePollMinMs.default;
      checkIntegerOption("OutboxRelay relay.idlePollMaxMs", tuning.idlePollMaxMs, min, R.idlePollMaxMs.max);
    }
    const memory = relayMemory({
      batchMaxBytes,
      parallelRounds,
      batchSize: tuning.batchSize ?? R.batchSize.default,
      maxMessageBytes: largestMessageBytes,
      ...(tuning.targetEventsPerSecond === undefined
        ? {}
        : { targetEventsPerSecond: tuning.targetEventsPerSecond }),
      ...(props.largePayloads === undefined
        ? {}
        : { maxPayloadBytes: props.largePayloads.maxPayloadBytes ?? MAX_PAYLOAD_BYTES_LIMIT }),
    });
    if (tuning.memorySize !== undefined && tuning.memorySize < memory.payloadMb) {
      throw new Error(
        `OutboxRelay relay.memorySize ${tuning.memorySize} MB is below the ${memory.payloadMb} MB that ` +
          `${parallelRounds} parallel rounds of ${memory.roundBytes} payload bytes need (relayMemory in ` +
          "infra/relayTiming.ts); raise it, or lower relay.batchMaxBytes or relay.parallelRounds",
      );
    }
    const relayEnv: Record<string, string> = {
      ...this.#databaseEnv(relaySecret),
      ...destination?.environment,
      ...(routes === undefined ? {} : { [DESTINATION_SETTINGS.routes.env]: routes.json }),
      ...environmentOf("OutboxRelay", [
        // Always written, though dwell is the handler's default too: the derived values below assume it.
        ["relay.mode", R.mode, tuning.mode ?? R.mode.default],
        // Derived here (relayTiming.ts): the Lambda timeout is sized from them.
        ["relaySchedule", R.maxDurationMs, timing.maxDurationMs],
        ["relay.budgetMarginMs", R.budgetMarginMs, budgetMarginMs],
        // The queue's limit; a bus's is fixed (the relay refuses RELAY_MAX_MESSAGE_BYTES with a bus).
        [
          "relay.maxMessageBytes",
          DESTINATION_SETTINGS.maxMessageBytes,
          destination?.kind === "sqs-fifo" ? maxMessageBytes : undefined,
        ],
        // Always set: the memory below is derived from it.
        ["relay.batchMaxBytes", R.batchMaxBytes, batchMaxBytes],
        ["relay.batchSize", R.batchSize, tuning.batchSize],
        ["relay.concurrency", R.concurrency, tuning.concurrency],
        ["relay.maxAttempts", R.maxAttempts, tuning.maxAttempts],
        ["relay.backoffBaseMs", R.backoffBaseMs, tuning.backoffBaseMs],
        ["relay.backoffMaxMs", R.backoffMaxMs, tuning.backoffMaxMs],
        ["relay.strictOrder", R.strictOrder, tuning.strictOrder],
        ["relay.retention", R.retention, tuning.retention],
        ["relay.publishTimeoutMs", R.publishTimeoutMs, tuning.publishTimeoutMs],
        ["relay.statementTimeoutMs", R.statementTimeoutMs, tuning.statementTimeoutMs],
        ["relay.parallelRounds", R.parallelRounds, tuning.parallelRounds],
        ["relay.idlePollMinMs", R.idlePollMinMs, tuning.idlePollMinMs],
        ["relay.idlePollMaxMs", R.idlePollMaxMs, tuning.idlePollMaxMs],
        ["relay.listen", R.listen, tuning.listen],
        ["relay.idleStopMs", R.idleStopMs, tuning.idleStopMs],
        ["relay.handoverProvingMs", R.handoverProvingMs, tuning.handoverProvingMs],
      ]),
      ...this.#metricsEnv(this.relayServiceName),
      ...payloads?.environment,
    };

    checkEnvironmentSize(this, "relay", relayEnv);
    const { role: relayRole, logGroup: relayLogs } = executionRole(this, "Relay", placement);
    grantSecretRead(this, relayRole, relaySecret);
    if (destination !== undefined) grantRelayPublish(destination, relayRole);
    if (routes !== undefined) grantRoutes(routes.places, relayRole);
    if (payloads !== undefined) grantPayloadWrite(payloads, relayRole);
    if (props.restrictSendToRelay === true) {
      if (destination === undefined) {
        throw new Error(
          "OutboxRelay: restrictSendToRelay needs the queue created by the construct; with routes and no " +
            "destination there is none (add the Deny statement to each route's queue policy, docs/deploy.md)",
        );
      }
      restrictSendToRelay(destination, relayRole, props.redriveRoles);
    } else if (props.redriveRoles !== undefined && props.redriveRoles.length > 0) {
      throw new Error(
        "OutboxRelay redriveRoles applies with restrictSendToRelay: without it, any role with sqs:SendMessage on " +
          "the queue can already redrive",
      );
    }
    this.relayFunction = outboxFunction(this, "Relay", placement, {
      code: "relay",
      description:
        routes !== undefined
          ? "Outbox relay: publishes committed outbox rows where their routes say, each aggregate's in order"
          : destination?.kind === "eventbridge"
            ? "Outbox relay: publishes committed outbox rows to an EventBridge bus, each aggregate's in order"
            : "Outbox relay: publishes committed outbox rows to SQS FIFO in per-aggregate order",
      role: relayRole,
      logGroup: relayLogs,
      timeout: Duration.seconds(timing.timeoutSeconds),
      memorySize: tuning.memorySize ?? memory.memoryMb,
      environment: relayEnv,
      reservedConcurrency: relayReservedConcurrency(tuning.reservedConcurrency, timing, relays),
    });
    dropStaleTicks(this.relayFunction);
    this.relayRule = relayRule(this, this.relayFunction, relayRate, relays);
    // Each invocation's pool holds a session per parallel round, plus one for LISTEN (functions/relay/handler.ts),
    // and the schedule can have concurrencyPerRelay invocations of each target alive at once (relayTiming.ts).
    this.maxRelaySessions =
      relays * timing.concurrencyPerRelay * (parallelRounds + (tuning.listen === true ? 1 : 0));

    // --- Purge ---------------------------------------------------------------------------------------------------
    const purge = props.purge ?? {};
    const purgeRate = wholeMinutes(purge.schedule ?? Duration.hours(1), "purge.schedule");
    const metricsRate = wholeMinutes(purge.metricsSchedule ?? Duration.minutes(1), "purge.metricsSchedule");
    const purgeSecret = db.purgeSecret ?? logins?.purge ?? database.secret;
    const P = PURGE_SETTINGS;
    const purgeEnv: Record<string, string> = {
      ...this.#databaseEnv(purgeSecret),
      ...environmentOf("OutboxRelay", [
        // Written though they are the handler's defaults, so the console shows what the purge keeps.
        [
          "purge.retention",
          P.retentionHours,
          wholeHours(purge.retention ?? Duration.hours(P.retentionHours.default), "purge.retention"),
        ],
        ["purge.batchSize", P.batchSize, purge.batchSize ?? P.batchSize.default],
        ["purge.budgetMarginMs", P.budgetMarginMs, purge.budgetMarginMs],
        [
          "purge.deadLetterRetention",
          P.deadLetterRetentionHours,
          purge.deadLetterRetention === undefined
            ? undefined
            : wholeHours(purge.deadLetterRetention, "purge.deadLetterRetention"),
        ],
      ]),
      ...this.#metricsEnv(this.purgeServiceName),
      // Behind routes, the relay's route table and default: the snapshot reports the backlog per destination by
      // the relay's own reader and matcher (names only: the purge gets no grant on any of them).
      ...(routes === undefined
        ? {}
        : { ...destination?.environment, [DESTINATION_SETTINGS.routes.env]: routes.json }),
    };
    checkEnvironmentSize(this, "purge", purgeEnv);
    if (typeof purge.reservedConcurrency === "number") {
      checkIntegerOption("OutboxRelay purge.reservedConcurrency", purge.reservedConcurrency, 1, 1000);
    }
    const { role: purgeRole, logGroup: purgeLogs } = executionRole(this, "Purge", placement);
    const purgeTimeout = purge.timeout ?? Duration.seconds(Math.min(300, purgeRate.toSeconds()));
    grantSecretRead(this, purgeRole, purgeSecret);
    this.purgeFunction = outboxFunction(this, "Purge", placement, {
      code: "purge",
      description: "Outbox purge: reports the outbox's backlog metrics and deletes old published rows",
      role: purgeRole,
      logGroup: purgeLogs,
      // 5 minutes, or the purge's interval if shorter, so two purges never overlap. A DELETE of 5000 rows takes
      // ~8 ms on a warm 1M-row table (functions/shared/purge.ts), so even a 1-minute run, stopping 10 s + one
      // 10 s statement timeout early, can remove millions of rows.
      timeout: purgeTimeout,
      memorySize: 256,
      environment: purgeEnv,
      // Nothing by default (see relayReservedConcurrency). `true`: two, since the hourly purge (up to its
      // timeout) and a snapshot-only run (a few short reads, well under a minute) may overlap; two purges cannot,
      // since a purge's timeout is at most its interval. A third invocation is then throttled and dropped.
      reservedConcurrency:
        purge.reservedConcurrency === true
          ? 2
          : purge.reservedConcurrency === false
            ? undefined
            : purge.reservedConcurrency,
    });
    dropStaleTicks(this.purgeFunction);
    const rules = purgeRules(this, this.purgeFunction, purgeRate, metricsRate);
    this.purgeRule = rules.purgeRule;
    this.metricsRule = rules.metricsRule;

    if (this.migrations !== undefined) {
      // Not only the schedules: on an update, new relay or purge code must not start (a manual invoke, the
      // previous schedule's tick) before the migration it relies on, so the functions themselves wait.
      const dependents = [
        this.relayFunction,
        this.purgeFunction,
        this.relayRule,
        this.purgeRule,
        this.metricsRule,
      ];
      for (const dependent of dependents) dependent.node.addDependency(this.migrations);
    }

    // --- Alarms, dashboard ---------------------------------------------------------------------------------------
    const alarmProps = props.alarms ?? {};
    this.alarmTopic = alarmTopic(this, alarmProps);
    const consumerPlaces = destinationConsumerPlaces(routes?.places ?? [], this.eventBus);
    const subjects = {
      relayFunction: this.relayFunction,
      purgeFunction: this.purgeFunction,
      relayRule: this.relayRule,
      purgeRule: this.purgeRule,
      metricsRule: this.metricsRule,
      queue: this.queue,
      queueWatchedByConsumer: props.consumer !== undefined,
      consumerDeadLetterQueue: this.consumerDeadLetterQueue,
      rotationFunctionName: db.rotationFunctionName,
      loginRotationFunctionNames: logins?.rotationFunctionNames ?? [],
      destinations:
        routes === undefined
          ? undefined
          : [
              ...routes.places,
              // The default once: a route to the same queue or bus is already its line.
              ...defaultPlace(this.queue, this.eventBus).filter(
                () => !routes.places.some((place) => place.target === (this.queue ?? this.eventBus)),
              ),
            ],
      metric: this.metric.bind(this),
      relayTimeout: Duration.seconds(timing.timeoutSeconds),
      purgeTimeout: purgeTimeout,
      relayTickGapSeconds: timing.longestTickGapSeconds,
      metricsRate,
      strictOrder: tuning.strictOrder === true,
      targetEventsPerSecond: (tuning.targetEventsPerSecond ?? DEFAULT_TARGET_EVENTS_PER_SECOND) * relays,
      destinationConsumers: destinationConsumers(consumerPlaces),
    };
    this.alarms = createAlarms(this, subjects, alarmProps);
    notifyTopic(this.alarmTopic, this.alarms);
    // The rules on its buses and its topics' subscription dead-letter queues, found in the stack at synthesis.
    alarmFoundConsumers(this, consumerPlaces, (found) => {
      Object.assign(this.alarms, found);
      notifyTopic(this.alarmTopic, found);
    });
    if (props.dashboard ?? true) {
      this.dashboard = createDashboard(this, subjects, purgeRate, Object.values(this.alarms));
    }
    if (props.consumer !== undefined) {
      if (this.queue === undefined) {
        throw new Error(
          "OutboxRelay: consumer reads the relay's queue; with a bus destination, give the queue a rule targets " +
            "its own OutboxConsumer (infra/consumer.ts)",
        );
      }
      // The created dead-letter queue already has its alarm above.
      // Its oldest-message alarm is the queue's only one (ConsumersStalled is left out): one page per stall, at
      // the relay's threshold unless the consumer sets its own.
      const threshold = props.consumer.oldestMessageAgeSeconds ?? alarmProps.queueOldestMessageAgeSeconds;
      if (this.consumerDeadLetterQueue !== undefined && props.consumer.deadLetterQueue !== undefined) {
        throw new Error(
          "OutboxRelay consumer.deadLetterQueue applies to a given queue: the created queue's dead-letter queue " +
            "is alarmed already (ConsumerDeadLetters)",
        );
      }
      // A given queue's dead letters page too: the one named, else the queue's own if the app defines it.
      const deadLetterQueue =
        this.consumerDeadLetterQueue === undefined
          ? (props.consumer.deadLetterQueue ?? appDeadLetterQueue(this.queue))
          : undefined;
      this.consumer = new OutboxConsumer(this, "Consumer", {
        alarmTopic: this.alarmTopic,
        ...props.consumer,
        ...(threshold === undefined ? {} : { oldestMessageAgeSeconds: threshold }),
        ...(payloads === undefined ? {} : { payloadBucket: payloads }),
        deadLetterQueue,
        queue: this.queue,
      });
    }
  }

  /**
   * Lets a producer (a Lambda, an ECS service, anything with security groups) reach the database's port, where
   * it writes its rows and their outbox events. That is all AWS can grant: the INSERT itself is authorized by the
   * producer's own database user (docs/deploy.md#producers lists the SQL privileges), not by the relay's secret.
   * Needs the database as `cluster`, `instance` or `connections`.
   */
  grantEnqueue(producer: ec2.IConnectable): void {
    const database = this.#database.connections;
    if (database === undefined) {
      throw new Error(
        "OutboxRelay.grantEnqueue: the construct does not know the database's security groups; give " +
          "database.cluster, database.instance or database.connections",
      );
    }
    database.connections.allowDefaultPortFrom(producer, "Outbox producer to the database");
  }

  /**
   * Lets a reader of the events resolve their large payloads (`largePayloads`): s3:GetObject under the payload
   * prefix (and kms:Decrypt on `largePayloads.encryptionKey`) for its role, which the created bucket's policy then
   * admits beside the relay's and the `consumer`'s (every other principal is denied reads, whatever its own
   * policy allows). For a consumer that is not an OutboxConsumer (an SQS Extended Client reader, a function of
   * your own); an OutboxConsumer given `payloadBucket` is admitted already. The role must be of this stack, or
   * imported into it by ARN.
   */
  grantPayloadRead(grantee: iam.IGrantable): void {
    grantPayloadReadTo(this.#payloads, grantee);
  }

  /** One of the construct's EMF metrics, with the `service` dimension Powertools adds. */
  metric(
    metricName: string,
    source: "relay" | "purge",
    options: { statistic?: string; period?: Duration; destination?: string } = {},
  ): cloudwatch.Metric {
    const service = source === "relay" ? this.relayServiceName : this.purgeServiceName;
    return new cloudwatch.Metric({
      namespace: this.metricsNamespace,
      metricName,
      // Behind a route table the relay also writes some figures per destination (observe/metrics.ts).
      dimensionsMap: {
        service,
        ...(options.destination === undefined ? {} : { [DESTINATION_DIMENSION]: options.destination }),
      },
      statistic: options.statistic ?? "Sum",
      period: options.period ?? Duration.minutes(1),
    });
  }

  /** The logins' secrets, when `database.logins` asks for them or defaults to them (see its doc). */
  #logins(
    props: OutboxRelayProps,
    database: ResolvedDatabase,
    vpcEndpoints: readonly ec2.IConnectable[],
  ): LoginSecrets | undefined {
    const db = props.database;
    const target = db.cluster ?? db.instance;
    const byDefault =
      target !== undefined &&
      (props.migrations ?? true) &&
      db.relaySecret === undefined &&
      db.purgeSecret === undefined;
    if (db.logins === false || (db.logins === undefined && !byDefault)) return undefined;
    if (target === undefined || !(props.migrations ?? true)) {
      throw new Error(
        "OutboxRelay database.logins needs `cluster` or `instance` (the secrets are attached to it) and the " +
          "migrations (which create the logins)",
      );
    }
    if (db.relaySecret !== undefined || db.purgeSecret !== undefined) {
      throw new Error(
        "OutboxRelay database.logins replaces relaySecret and purgeSecret: give one or the other",
      );
    }
    const options = typeof db.logins === "object" ? db.logins : {};
    return loginSecrets(this, {
      master: database.secret,
      target,
      vpc: db.vpc,
      table: props.outboxTable ?? DEFAULT_TABLE,
      rotation: options.rotation ?? {},
      logRetention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      vpcEndpoints,
    });
  }

  #databaseEnv(secret: secretsmanager.ISecret): Record<string, string> {
    const p = this.#props;
    // The ARN only: the Lambdas fetch the secret at run time (and again after a rotation); no credential is
    // ever placed in an environment variable.
    return {
      [DATABASE_SETTINGS.secretArn.env]: secret.secretArn,
      ...environmentOf("OutboxRelay", [
        ["database.databaseName", DATABASE_SETTINGS.name, p.database.databaseName],
        ["outboxSchema", OUTBOX_LOCATION_SETTINGS.schema, p.outboxSchema],
        ["outboxTable", OUTBOX_LOCATION_SETTINGS.table, p.outboxTable],
      ]),
    };
  }

  /** Powertools' service name (the metrics' `service` dimension) and the metrics' namespace. */
  #metricsEnv(serviceName: string): Record<string, string> {
    return {
      [METRICS_SETTINGS.serviceName.env]: serviceName,
      [METRICS_SETTINGS.namespace.env]: this.metricsNamespace,
    };
  }
}

/** The default destination behind a route table, as the relay names it in its `destination` dimension. */
function defaultPlace(queue: sqs.IQueue | undefined, bus: events.IEventBus | undefined): RoutedDestination[] {
  if (queue !== undefined) return [{ metricName: `sqs-fifo:${queue.queueName}`, label: "Default" }];
  if (bus !== undefined) return [{ metricName: `eventbridge:${bus.eventBusName}`, label: "Default" }];
  return [];
}

/** The dead-letter queue of a queue defined in this app (its RedrivePolicy), if any. */
function appDeadLetterQueue(queue: sqs.IQueue): sqs.IQueue | undefined {
  return queue instanceof sqs.Queue ? queue.deadLetterQueue?.queue : undefined;
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
