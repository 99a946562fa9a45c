import { Duration, Stack, Validations } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as kms from "aws-cdk-lib/aws-kms";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import type { IConstruct } from "constructs";
import { describe, expect, it } from "vitest";
import { HANDOVER_STARTUP_MS } from "../../functions/shared/relay/handover.ts";
import { RELAY_SETTINGS } from "../../functions/shared/relay/settings.ts";
import { examplePropsFromContext, OutboxExampleStack } from "../../infra/exampleStack.ts";
import { DEFAULT_MIGRATIONS_DIR, hashMigrations, OutboxRelay } from "../../infra/outboxRelay.ts";
import {
  MIB,
  type RelayTiming,
  relayMemory,
  relayTiming,
  silentPeriodsBeforeAlarm,
} from "../../infra/relayTiming.ts";
import {
  asArray,
  identityStatements,
  nagFindings,
  newApp,
  outboxStack,
  type Resource,
  resources,
} from "../support/template.ts";

/**
 * In-process synthesis of the example stack and of the construct on its own. Bundling is skipped here
 * (`aws:cdk:bundling-stacks: []`): these tests look at the template; infra.synth.test.ts runs the real
 * `cdk synth` with esbuild, cfn-lint and the bundled migration handler.
 */
function exampleApp(context: Record<string, unknown> = {}) {
  const app = newApp(context);
  const stack = new OutboxExampleStack(app, "Example", examplePropsFromContext(app.node));
  return { app, stack, template: Template.fromStack(stack) };
}

/** The one resource of `type` whose logical id is `prefix` plus CDK's 8-character hash. */
function logicalId(template: Template, type: string, prefix: string): string {
  const pattern = new RegExp(`^${prefix}[0-9A-F]{8}$`);
  const found = resources(template, type).filter(([id]) => pattern.test(id));
  if (found.length !== 1) throw new Error(`expected one ${type} named ${prefix}*, found ${found.length}`);
  return (found[0] as [string, Resource])[0];
}

function acknowledgements(scope: IConstruct): { path: string; id: string; reason: string }[] {
  const found: { path: string; id: string; reason: string }[] = [];
  const walk = (c: IConstruct) => {
    for (const entry of c.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
        found.push({ path: c.node.path, id, reason });
      }
    }
    for (const child of c.node.children) walk(child);
  };
  walk(scope);
  return found;
}

/** The relay's timing at the construct's defaults (a 1-minute schedule): what the templates below carry. */
const DEFAULT_TIMING = relayTiming({ scheduleSeconds: 60 });

describe("relay timing arithmetic", () => {
  it("sizes a 1-minute schedule at 155 s of dwell, a 165 s timeout and 4 invocations per relay", () => {
    expect(relayTiming({ scheduleSeconds: 60 })).toEqual({
      roundReserveMs: 25_000,
      loadAllowanceMs: 0,
      handoverAllowanceMs: 10_000,
      maxDurationMs: 155_000,
      timeoutSeconds: 165,
      concurrencyPerRelay: 4,
      reservedConcurrency: 4,
      longestTickGapSeconds: 120,
    });
    expect(relayTiming({ scheduleSeconds: 60, relays: 3 }).reservedConcurrency).toBe(12);
  });

  /**
   * Replays a schedule whose ticks each land anywhere in their minute-wide window: every invocation claims from
   * its start until its last round may start (start + dwell - reserve) and lives until start + timeout. Returns
   * the longest stretch in which nobody may start a round, and the most invocations alive at once. With
   * `provedAfterS`, the stretch runs until each invocation has started up and proved itself (the hand-over's
   * start-up allowance and proving period, handover.ts), not only until it starts: until then only its
   * predecessor is sure to claim.
   */
  function replay(timing: RelayTiming, scheduleSeconds: number, offsets: number[], provedAfterS = 0) {
    const starts = offsets.map((offset, k) => k * scheduleSeconds + offset);
    let longestGap = 0;
    let claimingUntil = starts[0] as number;
    for (const [k, start] of starts.entries()) {
      // The first has no predecessor to cover its start-up.
      if (k > 0) longestGap = Math.max(longestGap, start + provedAfterS - claimingUntil);
      claimingUntil = Math.max(claimingUntil, start + (timing.maxDurationMs - timing.roundReserveMs) / 1000);
    }
    let mostAlive = 0;
    for (const t of starts) {
      mostAlive = Math.max(mostAlive, starts.filter((s) => s <= t && t < s + timing.timeoutSeconds).length);
    }
    return { longestGap, mostAlive };
  }

  const EARLY = 0;
  const LATE = 59.999;
  /** A successor claims and has proved itself this long after it starts: start-up plus proving period. */
  const PROVED_AFTER_S = (HANDOVER_STARTUP_MS + RELAY_SETTINGS.handoverProvingMs.default) / 1000;
  const patterns: [string, (k: number) => number][] = [
    ["every tick on time", () => EARLY],
    ["every tick late", () => LATE],
    ["early, then late, alternating", (k) => (k % 2 === 0 ? EARLY : LATE)],
    ["late, then early, alternating", (k) => (k % 2 === 0 ? LATE : EARLY)],
    ["one late tick among early ones", (k) => (k === 3 ? LATE : EARLY)],
    ["one early tick among late ones", (k) => (k === 3 ? EARLY : LATE)],
    ["pseudo-random", (k) => ((k * 7919) % 60) + ((k * 31) % 1000) / 1000],
  ];

  it("leaves no moment without a claiming relay and never more invocations than reserved, with early and late ticks", () => {
    for (const minutes of [1, 2, 5, 13]) {
      const scheduleSeconds = minutes * 60;
      const timing = relayTiming({ scheduleSeconds });
      let worstAlive = 0;
      for (const [name, offset] of patterns) {
        const { longestGap, mostAlive } = replay(
          timing,
          scheduleSeconds,
          Array.from({ length: 12 }, (_, k) => offset(k)),
          PROVED_AFTER_S,
        );
        expect(longestGap, `${minutes} min, ${name}`).toBe(0);
        expect(mostAlive, `${minutes} min, ${name}`).toBeLessThanOrEqual(timing.concurrencyPerRelay);
        worstAlive = Math.max(worstAlive, mostAlive);
      }
      // The reservation is what early and late ticks can really produce, not a guess with room to spare.
      expect(worstAlive, `${minutes} min`).toBe(timing.concurrencyPerRelay);
      // The dwell cap, not the Lambda deadline minus the margin, ends the invocation.
      expect(timing.timeoutSeconds * 1000 - 5_000).toBeGreaterThan(timing.maxDurationMs);
    }
  });

  it("would leave the latest tick's start-up and proving period unclaimed without the hand-over allowance", () => {
    // An early tick followed by one at the very end of its window: before the allowance the predecessor stopped
    // starting rounds just as its successor started, before that one's cold start and proving period.
    const timing = relayTiming({ scheduleSeconds: 60 });
    const withoutAllowance = { ...timing, maxDurationMs: timing.maxDurationMs - timing.handoverAllowanceMs };
    expect(replay(withoutAllowance, 60, [EARLY, LATE], PROVED_AFTER_S).longestGap).toBeGreaterThan(9);
    expect(replay(timing, 60, [EARLY, LATE], PROVED_AFTER_S).longestGap).toBe(0);
  });

  it("would leave a gap with the on-time arithmetic (no jitter allowance) when a late tick follows an early one", () => {
    const onTime = relayTiming({ scheduleSeconds: 60, jitterSeconds: 0 });
    const { longestGap } = replay(onTime, 60, [EARLY, LATE, EARLY, LATE]);
    // Nearly the whole jitter window: 60 s less the hand-over allowance.
    expect(longestGap).toBeGreaterThan(45);
  });

  it("refuses schedules that are not whole minutes, that Lambda's 900 s cannot cover, or more than 5 relays", () => {
    expect(() => relayTiming({ scheduleSeconds: 90 })).toThrow(/whole number of minutes/);
    expect(() => relayTiming({ scheduleSeconds: 14 * 60 })).toThrow(/over Lambda's 900 s/);
    expect(() => relayTiming({ scheduleSeconds: 60, relays: 6 })).toThrow(
      /relays must be an integer from 1 to 5/,
    );
  });

  it("waits one period past the longest legal gap before calling the relay silent", () => {
    expect(silentPeriodsBeforeAlarm(120, 60)).toBe(3);
    expect(silentPeriodsBeforeAlarm(360, 60)).toBe(7);
  });

  it("derives the relay's memory from the byte budget of a round times the parallel rounds", () => {
    // 64 MiB per round (min(64 MiB, 100 x 1 MiB)), 2 rounds, 3 copies, 256 MB base: 640 MB.
    expect(
      relayMemory({ batchMaxBytes: 64 * MIB, parallelRounds: 2, batchSize: 100, maxMessageBytes: MIB }),
    ).toMatchObject({
      roundBytes: 64 * MIB,
      payloadMb: 640,
    });
    // The rows cap the round before the byte budget does: 100 x 256 KiB = 25 MiB; 256 + 150 = 406 -> 448 MB.
    expect(
      relayMemory({ batchMaxBytes: 64 * MIB, parallelRounds: 2, batchSize: 100, maxMessageBytes: 262_144 })
        .payloadMb,
    ).toBe(448);
    expect(() =>
      relayMemory({ batchMaxBytes: 1024 * MIB, parallelRounds: 4, batchSize: 1000, maxMessageBytes: MIB }),
    ).toThrow(/over Lambda's 10,240 MB/);
  });
});

describe("example stack: new VPC, Aurora Serverless v2 and the outbox construct", () => {
  const { app, template } = exampleApp();

  it("creates a high-throughput FIFO queue of 1 MiB messages, encrypted, with a FIFO dead-letter queue", () => {
    const queueId = logicalId(template, "AWS::SQS::Queue", "OutboxQueue");
    const dlqId = logicalId(template, "AWS::SQS::Queue", "OutboxConsumerDeadLetterQueue");
    template.hasResource("AWS::SQS::Queue", {
      Properties: {
        FifoQueue: true,
        ContentBasedDeduplication: false,
        DeduplicationScope: "messageGroup",
        FifoThroughputLimit: "perMessageGroupId",
        MaximumMessageSize: 1_048_576,
        SqsManagedSseEnabled: true,
        RedrivePolicy: { deadLetterTargetArn: { "Fn::GetAtt": [dlqId, "Arn"] }, maxReceiveCount: 5 },
      },
      UpdateReplacePolicy: "Retain",
      DeletionPolicy: "RetainExceptOnCreate",
    });
    expect(
      resources(template, "AWS::SQS::Queue")
        .map(([id]) => id)
        .sort(),
    ).toEqual([dlqId, queueId].sort());
  });

  it("denies every non-TLS request to both queues", () => {
    for (const name of ["OutboxQueue", "OutboxConsumerDeadLetterQueue"]) {
      const queueId = logicalId(template, "AWS::SQS::Queue", name);
      template.hasResourceProperties("AWS::SQS::QueuePolicy", {
        Queues: [{ Ref: queueId }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: "Deny",
              Action: "sqs:*",
              Condition: { Bool: { "aws:SecureTransport": "false" } },
              Principal: { AWS: "*" },
            }),
          ]),
        },
      });
    }
  });

  it("runs the relay on nodejs24.x/arm64 as an ESM bundle, in the VPC, sized for a 1-minute schedule", () => {
    const relayId = logicalId(template, "AWS::Lambda::Function", "OutboxRelayFunction");
    const relay = template.toJSON().Resources[relayId] as Resource;
    expect(relay.Properties).toMatchObject({
      Runtime: "nodejs24.x",
      Architectures: ["arm64"],
      Handler: "index.handler",
      Timeout: DEFAULT_TIMING.timeoutSeconds,
      // The 448 MB the payloads need, above the 384 MB of the default 1,000 events/s (relayTiming.ts).
      MemorySize: 448,
      VpcConfig: {
        SecurityGroupIds: [
          {
            "Fn::GetAtt": [
              logicalId(template, "AWS::EC2::SecurityGroup", "OutboxFunctionsSecurityGroup"),
              "GroupId",
            ],
          },
        ],
      },
      Environment: {
        Variables: {
          // The relay runs as its own login (issue 29), not as the cluster's master user.
          DATABASE_SECRET_ARN: {
            Ref: logicalId(
              template,
              "AWS::SecretsManager::SecretTargetAttachment",
              "OutboxRelayLoginSecretAttachment",
            ),
          },
          DATABASE_NAME: "app",
          OUTBOX_QUEUE_URL: { Ref: logicalId(template, "AWS::SQS::Queue", "OutboxQueue") },
          RELAY_MODE: "dwell",
          RELAY_MAX_DURATION_MS: String(DEFAULT_TIMING.maxDurationMs),
          RELAY_BUDGET_MARGIN_MS: "5000",
          RELAY_MAX_MESSAGE_BYTES: "1048576",
          RELAY_BATCH_MAX_BYTES: String(16 * MIB),
          POWERTOOLS_SERVICE_NAME: "Example-Outbox-relay",
          POWERTOOLS_METRICS_NAMESPACE: "OutboxRelay",
        },
      },
    });
    // Nothing reserved by default (test/infra/deploy.test.ts: a new account's quota cannot spare any).
    expect(relay.Properties).not.toHaveProperty("ReservedConcurrentExecutions");
    // Stale ticks are dropped, not retried or queued for hours.
    template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
      FunctionName: { Ref: relayId },
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 60,
    });
  });

  it("puts no credential in any Lambda environment: the secret is referenced by ARN only", () => {
    for (const [id, fn] of resources(template, "AWS::Lambda::Function")) {
      const variables = ((fn.Properties?.Environment as { Variables?: Record<string, unknown> })?.Variables ??
        {}) as Record<string, unknown>;
      for (const [name, value] of Object.entries(variables)) {
        expect(name, `${id}.${name}`).not.toMatch(/PASSWORD|DATABASE_URL|SECRET$/);
        expect(JSON.stringify(value), `${id}.${name}`).not.toMatch(/resolve:secretsmanager|SecretString/);
      }
    }
  });

  it("starts the relay every minute, the purge hourly and its snapshot every minute, only after the migrations", () => {
    const migrationsId = logicalId(template, "Custom::OutboxMigrations", "OutboxMigrations");
    for (const [rule, fn, rate, input] of [
      // Each relay target names its hand-over slot (functions/shared/relay/handover.ts).
      ["Relay", "Relay", "rate(1 minute)", JSON.stringify({ relaySlot: 0 })],
      ["Purge", "Purge", "rate(1 hour)", undefined],
      ["Metrics", "Purge", "rate(1 minute)", JSON.stringify({ snapshotOnly: true })],
    ] as const) {
      const fnId = logicalId(template, "AWS::Lambda::Function", `Outbox${fn}Function`);
      const ruleId = logicalId(template, "AWS::Events::Rule", `Outbox${rule}Schedule`);
      template.hasResource("AWS::Events::Rule", {
        Properties: {
          ScheduleExpression: rate,
          State: "ENABLED",
          Targets: [
            {
              Arn: { "Fn::GetAtt": [fnId, "Arn"] },
              Input: input ?? Match.absent(),
              RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 },
            },
          ],
        },
        DependsOn: [migrationsId],
      });
      // Lambda accepts invocations from this rule only.
      template.hasResourceProperties("AWS::Lambda::Permission", {
        Action: "lambda:InvokeFunction",
        FunctionName: { "Fn::GetAtt": [fnId, "Arn"] },
        Principal: "events.amazonaws.com",
        SourceArn: { "Fn::GetAtt": [ruleId, "Arn"] },
      });
    }
  });

  it("scopes IAM to the queue and the secret; the only '*' is the ENI statement AWS requires", () => {
    // Each function reads only its own login's secret (the relay's here); the migrations read the master's.
    const secret = {
      Ref: logicalId(
        template,
        "AWS::SecretsManager::SecretTargetAttachment",
        "OutboxRelayLoginSecretAttachment",
      ),
    };
    const queue = { "Fn::GetAtt": [logicalId(template, "AWS::SQS::Queue", "OutboxQueue"), "Arn"] };
    const ours = identityStatements(template).filter(({ source }) => source.startsWith("Outbox"));
    const grantsOf = (role: string) =>
      ours
        .filter(({ source }) => source.startsWith(`Outbox${role}Role`))
        .map(({ statement }) => ({ Action: statement.Action, Resource: statement.Resource }));

    expect(grantsOf("Relay")).toEqual(
      expect.arrayContaining([
        { Action: "secretsmanager:GetSecretValue", Resource: secret },
        { Action: ["sqs:GetQueueAttributes", "sqs:SendMessage"], Resource: queue },
      ]),
    );
    for (const role of ["Relay", "Purge", "Migrate"]) {
      const actions = grantsOf(role).flatMap((s) => asArray(s.Action as string | string[]));
      expect(
        actions.filter((a) => a.startsWith("sqs:")),
        role,
      ).toEqual(role === "Relay" ? ["sqs:GetQueueAttributes", "sqs:SendMessage"] : []);
      expect(
        actions.filter((a) => a.startsWith("secretsmanager:")),
        role,
      ).toEqual(["secretsmanager:GetSecretValue"]);
      expect(
        actions.some((a) => a.includes("*")),
        role,
      ).toBe(false);
    }
    for (const { source, statement } of identityStatements(template)) {
      for (const resource of asArray(statement.Resource)) {
        if (resource !== "*") continue;
        // CDK's log-retention function: retention of the groups RDS and the rotation Lambda create (issue 29).
        if (source.startsWith("LogRetention")) {
          expect(asArray(statement.Action as string | string[]).every((a) => a.startsWith("logs:"))).toBe(
            true,
          );
          continue;
        }
        expect(statement.Sid, `${source} has Resource "*"`).toBe("ManageVpcNetworkInterfaces");
        expect(asArray(statement.Action as string | string[]).every((a) => a.startsWith("ec2:"))).toBe(true);
      }
    }
    // No AWS managed policy on our roles: their log permissions would cover every log group.
    for (const [id, role] of resources(template, "AWS::IAM::Role").filter(([id]) =>
      id.startsWith("Outbox"),
    )) {
      expect(role.Properties?.ManagedPolicyArns, id).toBeUndefined();
    }
  });

  it("gives each Lambda its own log group with a one-month retention", () => {
    for (const name of ["Relay", "Purge", "Migrate"]) {
      const fnId = logicalId(template, "AWS::Lambda::Function", `Outbox${name}Function`);
      const logsId = logicalId(template, "AWS::Logs::LogGroup", `Outbox${name}Logs`);
      expect((template.toJSON().Resources[fnId] as Resource).Properties).toMatchObject({
        LoggingConfig: { LogGroup: { Ref: logsId } },
        Role: { "Fn::GetAtt": [logicalId(template, "AWS::IAM::Role", `Outbox${name}Role`), "Arn"] },
      });
    }
    for (const [id, group] of resources(template, "AWS::Logs::LogGroup")) {
      expect(group.Properties?.RetentionInDays, id).toBe(30);
    }
  });

  it("runs the migrations at deploy time, after the cluster, and re-runs them when a file changes", () => {
    const migrations = resources(template, "Custom::OutboxMigrations");
    expect(migrations).toHaveLength(1);
    const [, resource] = migrations[0] as [string, Resource];
    expect(resource.Properties?.MigrationsHash).toBe(hashMigrations(DEFAULT_MIGRATIONS_DIR));
    expect(resource.Properties?.ServiceTimeout).toBe("1200");
    template.hasResourceProperties("AWS::Lambda::Function", {
      Description: Match.stringLikeRegexp("^Outbox migrations"),
      Timeout: 900,
    });
    expect(resource.DependsOn).toEqual(
      expect.arrayContaining([
        logicalId(template, "AWS::RDS::DBCluster", "Database"),
        logicalId(template, "AWS::RDS::DBInstance", "DatabaseWriter"),
        logicalId(template, "AWS::SecretsManager::SecretTargetAttachment", "DatabaseSecretAttachment"),
      ]),
    );
  });

  it("pages for every way the relay can stop: each alarm with its metric, threshold and missing-data treatment", () => {
    const topicId = logicalId(template, "AWS::SNS::Topic", "OutboxAlarmTopic");
    template.hasResourceProperties("AWS::SNS::Topic", {
      KmsMasterKeyId: {
        "Fn::GetAtt": [logicalId(template, "AWS::KMS::Key", "OutboxAlarmTopicKey"), "Arn"],
      },
    });
    const relayFn = { Ref: logicalId(template, "AWS::Lambda::Function", "OutboxRelayFunction") };
    const purgeFn = { Ref: logicalId(template, "AWS::Lambda::Function", "OutboxPurgeFunction") };
    const relay = {
      Namespace: "OutboxRelay",
      Dimensions: [{ Name: "service", Value: "Example-Outbox-relay" }],
    };
    const purge = {
      Namespace: "OutboxRelay",
      Dimensions: [{ Name: "service", Value: "Example-Outbox-purge" }],
    };
    const lambdaOf = (fn: unknown) => ({
      Namespace: "AWS/Lambda",
      Dimensions: [{ Name: "FunctionName", Value: fn }],
    });
    const queueName = { "Fn::GetAtt": [logicalId(template, "AWS::SQS::Queue", "OutboxQueue"), "QueueName"] };
    const dlqName = {
      "Fn::GetAtt": [logicalId(template, "AWS::SQS::Queue", "OutboxConsumerDeadLetterQueue"), "QueueName"],
    };
    const ruleName = (prefix: string) => ({ Ref: logicalId(template, "AWS::Events::Rule", prefix) });
    const failedInvocations = (id: string, rule: string) => ({
      Id: id,
      MetricStat: {
        Metric: {
          Namespace: "AWS/Events",
          MetricName: "FailedInvocations",
          Dimensions: [{ Name: "RuleName", Value: ruleName(rule) }],
        },
        Period: 300,
        Stat: "Sum",
      },
      ReturnData: false,
    });
    // The failure each alarm catches is in docs/operations.md#what-pages-you.
    const table: [string, Record<string, unknown>][] = [
      [
        // The relay's own heartbeat, written every 10 s while it runs: not Lambda's Invocations, which arrives
        // when a 155 s invocation ends, stamped with its start. Empty minutes filled with 0: on the bare metric,
        // missing = breaching pages only once CloudWatch's whole evaluation range (5 periods for 3) is empty.
        "OutboxRelayNotRunningAlarm",
        {
          Metrics: [
            Match.objectLike({ Expression: "FILL(heartbeat, 0)" }),
            {
              Id: "heartbeat",
              MetricStat: { Metric: { ...relay, MetricName: "RelayHeartbeat" }, Period: 60, Stat: "Sum" },
              ReturnData: false,
            },
          ],
          Threshold: 1,
          ComparisonOperator: "LessThanThreshold",
          EvaluationPeriods: 3,
          DatapointsToAlarm: 3,
          TreatMissingData: "breaching",
        },
      ],
      [
        // Written by the relay as a window fails (SQS down, AccessDenied, the database unreachable): pages
        // within minutes, not when an invocation ends.
        "OutboxRelayStalledAlarm",
        {
          ...relay,
          MetricName: "RelayStalled",
          Statistic: "Minimum",
          Period: 60,
          Threshold: 1,
          ComparisonOperator: "GreaterThanOrEqualToThreshold",
          EvaluationPeriods: 3,
          DatapointsToAlarm: 3,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxScheduleFailedInvocationsAlarm",
        {
          Metrics: Match.arrayWith([
            Match.objectLike({ Expression: "FILL(relay, 0) + FILL(purge, 0) + FILL(snapshot, 0)" }),
            failedInvocations("relay", "OutboxRelaySchedule"),
            failedInvocations("purge", "OutboxPurgeSchedule"),
            failedInvocations("snapshot", "OutboxMetricsSchedule"),
          ]),
          Threshold: 1,
          ComparisonOperator: "GreaterThanOrEqualToThreshold",
          EvaluationPeriods: 1,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxRelayErrorsAlarm",
        {
          ...lambdaOf(relayFn),
          MetricName: "Errors",
          Period: 60,
          Threshold: 1,
          ComparisonOperator: "GreaterThanOrEqualToThreshold",
          // 4 x 60 s = 240 s >= the 155 s timeout + a period: an error sent at the end of an invocation that
          // started in the oldest period is still in the window.
          EvaluationPeriods: 4,
          DatapointsToAlarm: 2,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxPublishFailuresAlarm",
        {
          ...relay,
          MetricName: "PublishFailures",
          Statistic: "Sum",
          Period: 60,
          Threshold: 1,
          ComparisonOperator: "GreaterThanOrEqualToThreshold",
          EvaluationPeriods: 5,
          DatapointsToAlarm: 5,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxRelayThrottlesAlarm",
        {
          ...lambdaOf(relayFn),
          MetricName: "Throttles",
          Period: 300,
          EvaluationPeriods: 2,
          DatapointsToAlarm: 1,
          Threshold: 1,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxBatchDurationAlarm",
        {
          ...relay,
          MetricName: "BatchDuration",
          ExtendedStatistic: "p95",
          Threshold: 5000,
          EvaluationPeriods: 5,
          DatapointsToAlarm: 3,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxSnapshotStoppedAlarm",
        {
          Metrics: [
            Match.objectLike({ Expression: "FILL(snapshots, 0)" }),
            {
              Id: "snapshots",
              MetricStat: {
                Metric: { ...purge, MetricName: "PendingEvents" },
                Period: 60,
                Stat: "SampleCount",
              },
              ReturnData: false,
            },
          ],
          Threshold: 1,
          ComparisonOperator: "LessThanThreshold",
          EvaluationPeriods: 3,
          DatapointsToAlarm: 3,
          TreatMissingData: "breaching",
        },
      ],
      [
        "OutboxOldestPendingAgeAlarm",
        {
          ...purge,
          MetricName: "OldestPendingAgeSeconds",
          Statistic: "Maximum",
          Period: 60,
          Threshold: 900,
          ComparisonOperator: "GreaterThanThreshold",
          EvaluationPeriods: 2,
          TreatMissingData: "missing",
        },
      ],
      [
        "OutboxPendingBacklogAlarm",
        {
          ...purge,
          MetricName: "PendingEvents",
          Statistic: "Maximum",
          // 60 s of events at the default 3,000 events/s target, not a fixed 1,000 (0.3 s of it).
          Threshold: 60_000,
          TreatMissingData: "missing",
        },
      ],
      [
        "OutboxDeadLettersAlarm",
        { ...purge, MetricName: "DeadLetters", Threshold: 0, TreatMissingData: "missing" },
      ],
      [
        "OutboxNewDeadLettersAlarm",
        { ...relay, MetricName: "EventsDeadLettered", Threshold: 0, TreatMissingData: "notBreaching" },
      ],
      [
        "OutboxPurgeErrorsAlarm",
        {
          ...lambdaOf(purgeFn),
          MetricName: "Errors",
          Period: 300,
          EvaluationPeriods: 2,
          DatapointsToAlarm: 1,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxConsumersStalledAlarm",
        {
          Namespace: "AWS/SQS",
          MetricName: "ApproximateAgeOfOldestMessage",
          Dimensions: [{ Name: "QueueName", Value: queueName }],
          Statistic: "Maximum",
          Threshold: 900,
          ComparisonOperator: "GreaterThanThreshold",
          EvaluationPeriods: 3,
          DatapointsToAlarm: 3,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxConsumerDeadLettersAlarm",
        {
          Namespace: "AWS/SQS",
          MetricName: "ApproximateNumberOfMessagesVisible",
          Dimensions: [{ Name: "QueueName", Value: dlqName }],
          Threshold: 0,
          ComparisonOperator: "GreaterThanThreshold",
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxNewConsumerDeadLettersAlarm",
        {
          Metrics: Match.arrayWith([Match.objectLike({ Expression: "DIFF(FILL(visible, 0))" })]),
          Threshold: 0,
          ComparisonOperator: "GreaterThanThreshold",
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxSecretRotationErrorsAlarm",
        {
          ...lambdaOf(Match.stringLikeRegexp("DatabaseRotationSingleUser")),
          MetricName: "Errors",
          Threshold: 1,
          TreatMissingData: "notBreaching",
        },
      ],
      [
        "OutboxLoginRotationErrorsAlarm",
        {
          Metrics: Match.arrayWith([Match.objectLike({ Expression: "FILL(r0, 0) + FILL(r1, 0)" })]),
          Threshold: 1,
          EvaluationPeriods: 4,
          DatapointsToAlarm: 1,
          TreatMissingData: "notBreaching",
        },
      ],
    ];
    const alarms = template.findResources("AWS::CloudWatch::Alarm");
    for (const [prefix, expected] of table) {
      const id = logicalId(template, "AWS::CloudWatch::Alarm", prefix);
      const actual = Template.fromJSON({ Resources: { [id]: alarms[id] } });
      actual.hasResourceProperties("AWS::CloudWatch::Alarm", {
        ...expected,
        AlarmActions: [{ Ref: topicId }],
        OKActions: [{ Ref: topicId }],
      });
    }
    expect(Object.keys(alarms)).toHaveLength(table.length);
    template.resourceCountIs("AWS::CloudWatch::Dashboard", 1);
  });

  it("evaluates every alarm on an AWS/Lambda metric over more than the function's timeout plus a period", () => {
    // Lambda sends Errors, Throttles, Invocations when an invocation ends, stamped with its start: a datapoint
    // can arrive a whole timeout after its period closed, and the window must still hold that period then.
    const timeouts = new Map(
      resources(template, "AWS::Lambda::Function").map(([id, fn]) => [id, fn.Properties?.Timeout as number]),
    );
    const checked: string[] = [];
    for (const [id, alarm] of resources(template, "AWS::CloudWatch::Alarm")) {
      const props = alarm.Properties as Record<string, unknown>;
      type Stat = { Namespace: string; Dimensions?: { Name: string; Value: unknown }[]; Period: number };
      const stats: Stat[] =
        props.Namespace === undefined
          ? ((props.Metrics ?? []) as { MetricStat?: { Metric: Stat; Period: number } }[])
              .filter((query) => query.MetricStat !== undefined)
              .map((query) => ({
                ...(query.MetricStat?.Metric as Stat),
                Period: query.MetricStat?.Period ?? 0,
              }))
          : [props as unknown as Stat];
      for (const stat of stats.filter((one) => one.Namespace === "AWS/Lambda")) {
        const fn = stat.Dimensions?.find((dimension) => dimension.Name === "FunctionName")?.Value as
          | { Ref?: string }
          | string;
        // A function of the template has its timeout there; one outside it (the rotation's), Lambda's longest.
        const ref = typeof fn === "object" ? fn.Ref : undefined;
        const timeout = ref !== undefined && timeouts.has(ref) ? (timeouts.get(ref) as number) : 900;
        const period = (props.Period as number | undefined) ?? stat.Period;
        const window = period * (props.EvaluationPeriods as number);
        expect(
          window,
          `${id}: ${window} s window, ${timeout} s timeout, ${period} s period`,
        ).toBeGreaterThanOrEqual(timeout + period);
        checked.push(id.replace(/[0-9A-F]{8}$/, ""));
      }
    }
    expect(checked.toSorted()).toEqual(
      expect.arrayContaining([
        "OutboxPurgeErrorsAlarm",
        "OutboxRelayErrorsAlarm",
        "OutboxRelayThrottlesAlarm",
        "OutboxSecretRotationErrorsAlarm",
        "OutboxLoginRotationErrorsAlarm",
      ]),
    );
    // The heartbeat and the stall are the relay's own metrics, stamped while it runs, not Lambda's.
    for (const prefix of ["OutboxRelayNotRunningAlarm", "OutboxRelayStalledAlarm"]) {
      expect(checked).not.toContain(prefix);
      const props = template.findResources("AWS::CloudWatch::Alarm")[
        logicalId(template, "AWS::CloudWatch::Alarm", prefix)
      ]?.Properties as { Namespace?: string; Metrics?: { MetricStat?: { Metric: { Namespace: string } } }[] };
      const namespaces = [
        props.Namespace,
        ...(props.Metrics ?? []).map((m) => m.MetricStat?.Metric.Namespace),
      ];
      expect(namespaces.filter((namespace) => namespace !== undefined)).toEqual(["OutboxRelay"]);
    }
  });

  it("alarms on the rotation Lambda CDK names, whose security group reaches the Secrets Manager endpoint and the database", () => {
    const rotationGroup = logicalId(template, "AWS::EC2::SecurityGroup", "RotationSecurityGroup");
    const endpointGroup = logicalId(
      template,
      "AWS::EC2::SecurityGroup",
      "VpcSecretsManagerEndpointSecurityGroup",
    );
    const databaseGroup = logicalId(template, "AWS::EC2::SecurityGroup", "DatabaseSecurityGroup");
    const rotationGroupId = { "Fn::GetAtt": [rotationGroup, "GroupId"] };
    // The rotation function (a Serverless application) runs in that group, against that endpoint.
    template.hasResourceProperties("AWS::Serverless::Application", {
      Parameters: Match.objectLike({
        vpcSecurityGroupIds: rotationGroupId,
        endpoint: Match.objectLike({ "Fn::Join": Match.anyValue() }),
      }),
    });
    const [, application] = resources(template, "AWS::Serverless::Application")[0] as [string, Resource];
    const functionName = (application.Properties as { Parameters: Record<string, string> }).Parameters
      .functionName;
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "Errors",
      Dimensions: [{ Name: "FunctionName", Value: functionName }],
    });
    // Ingress on the endpoint from the rotation group, and the rotation group's own egress to it (its egress is
    // listed, not open).
    template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: { "Fn::GetAtt": [endpointGroup, "GroupId"] },
      SourceSecurityGroupId: rotationGroupId,
      FromPort: 443,
      ToPort: 443,
    });
    template.hasResourceProperties("AWS::EC2::SecurityGroupEgress", {
      GroupId: rotationGroupId,
      DestinationSecurityGroupId: { "Fn::GetAtt": [endpointGroup, "GroupId"] },
      FromPort: 443,
    });
    template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: { "Fn::GetAtt": [databaseGroup, "GroupId"] },
      SourceSecurityGroupId: rotationGroupId,
      FromPort: { "Fn::GetAtt": [logicalId(template, "AWS::RDS::DBCluster", "Database"), "Endpoint.Port"] },
    });
    template.hasResourceProperties("AWS::EC2::SecurityGroup", {
      GroupDescription: Match.stringLikeRegexp("rotation"),
      SecurityGroupEgress: [Match.objectLike({ CidrIp: "255.255.255.255/32" })],
    });
  });

  it("lets the Lambdas out only to the VPC endpoints and the database, when endpoints exist", () => {
    const functionsGroup = logicalId(template, "AWS::EC2::SecurityGroup", "OutboxFunctionsSecurityGroup");
    const group = template.toJSON().Resources[functionsGroup] as Resource;
    // CDK's placeholder rule for "no egress" (a disallowed address), no 0.0.0.0/0 on 443.
    expect(group.Properties?.SecurityGroupEgress).toEqual([
      expect.objectContaining({ CidrIp: "255.255.255.255/32" }),
    ]);
    const egress = resources(template, "AWS::EC2::SecurityGroupEgress")
      .filter(
        ([, r]) =>
          JSON.stringify(r.Properties?.GroupId) ===
          JSON.stringify({ "Fn::GetAtt": [functionsGroup, "GroupId"] }),
      )
      .map(
        ([, r]) =>
          (r.Properties as { DestinationSecurityGroupId: { "Fn::GetAtt": string[] } })
            .DestinationSecurityGroupId["Fn::GetAtt"][0],
      );
    expect(egress.map((id) => id?.replace(/[0-9A-F]{8}$/, "")).sort()).toEqual(
      [
        "DatabaseSecurityGroup",
        "VpcSecretsManagerEndpointSecurityGroup",
        "VpcSqsEndpointSecurityGroup",
      ].sort(),
    );
  });

  it("runs the migrations before the relay and purge functions, and again for another database", () => {
    const migrationsId = logicalId(template, "Custom::OutboxMigrations", "OutboxMigrations");
    for (const name of ["OutboxRelayFunction", "OutboxPurgeFunction"]) {
      const fn = template.toJSON().Resources[logicalId(template, "AWS::Lambda::Function", name)] as Resource;
      expect(fn.DependsOn, name).toContain(migrationsId);
    }
    const [, migrations] = resources(template, "Custom::OutboxMigrations")[0] as [string, Resource];
    expect(migrations.Properties).toMatchObject({
      MigrationsHash: hashMigrations(DEFAULT_MIGRATIONS_DIR),
      DatabaseSecretArn: {
        Ref: logicalId(template, "AWS::SecretsManager::SecretTargetAttachment", "DatabaseSecretAttachment"),
      },
      DatabaseName: "app",
      // A replaced cluster has a new resource id: the migrations run against it before any relay polls it.
      DatabaseIdentity: {
        "Fn::GetAtt": [logicalId(template, "AWS::RDS::DBCluster", "Database"), "DBClusterResourceId"],
      },
    });
  });

  it("passes cdk-nag's AWS Solutions rules with no unacknowledged finding", () => {
    expect(nagFindings(app)).toEqual([]);
  });

  it("acknowledges only findings that exist, each with a written reason", () => {
    const acks = acknowledgements(app).filter((a) => a.id.includes("AwsSolutions-"));
    for (const ack of acks) expect(ack.reason.length, `${ack.path} ${ack.id}`).toBeGreaterThan(60);
    const raw = nagFindings(app, true);
    for (const ack of acks) {
      const rule = ack.id.replace(/^annotation::/i, "");
      expect(
        raw.some((finding) => finding.startsWith(`${rule} (`) && finding.includes(`at ${ack.path}/`)),
        `stale acknowledgement ${rule} on ${ack.path}`,
      ).toBe(true);
    }
    expect(acks.map((a) => `${a.path} ${a.id.replace(/^annotation::/i, "")}`).sort()).toEqual([
      "Example/Database AwsSolutions-RDS10",
      "Example/Database AwsSolutions-RDS6",
      expect.stringMatching(
        /^Example\/LogRetention\w+ AwsSolutions-IAM4\[Policy::arn:<AWS::Partition>:iam::aws:policy\/service-role\/AWSLambdaBasicExecutionRole\]$/,
      ),
      expect.stringMatching(/^Example\/LogRetention\w+ AwsSolutions-IAM5\[Resource::\*\]$/),
      "Example/Outbox/MigrateRole AwsSolutions-IAM5[Resource::*]",
      expect.stringMatching(
        /^Example\/Outbox\/MigrationsProviderRole AwsSolutions-IAM5\[Resource::<OutboxMigrateFunction\w+\.Arn>:\*\]$/,
      ),
      "Example/Outbox/PurgeRole AwsSolutions-IAM5[Resource::*]",
      "Example/Outbox/RelayRole AwsSolutions-IAM5[Resource::*]",
    ]);
  });
});

describe("example stack against an existing database (context values, no lookups)", () => {
  const secretArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders/db-AbCdEf";
  const { app, template } = exampleApp({
    databaseSecretArn: secretArn,
    vpcId: "vpc-0123456789abcdef0",
    subnetIds: "subnet-0aaaaaaaaaaaaaaaa, subnet-0bbbbbbbbbbbbbbbb",
    databaseSecurityGroupId: "sg-0cccccccccccccccc",
    databasePort: "6432",
    databaseName: "orders",
    migrations: "false",
  });

  it("creates no VPC or database, and places the Lambdas in the given subnets", () => {
    template.resourceCountIs("AWS::EC2::VPC", 0);
    template.resourceCountIs("AWS::RDS::DBCluster", 0);
    template.resourceCountIs("Custom::OutboxMigrations", 0);
    template.hasResourceProperties("AWS::Lambda::Function", {
      Runtime: "nodejs24.x",
      VpcConfig: { SubnetIds: ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"] },
      Environment: {
        Variables: Match.objectLike({ DATABASE_SECRET_ARN: secretArn, DATABASE_NAME: "orders" }),
      },
    });
  });

  it("opens the database's security group to the Lambdas' on the given port", () => {
    template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      GroupId: "sg-0cccccccccccccccc",
      FromPort: 6432,
      ToPort: 6432,
      SourceSecurityGroupId: {
        "Fn::GetAtt": [
          logicalId(template, "AWS::EC2::SecurityGroup", "OutboxFunctionsSecurityGroup"),
          "GroupId",
        ],
      },
    });
  });

  it("grants GetSecretValue on exactly that secret ARN", () => {
    const reads = identityStatements(template).filter(({ statement }) =>
      asArray(statement.Action as string | string[]).some((a) => a.startsWith("secretsmanager:")),
    );
    expect(reads.length).toBeGreaterThan(0);
    for (const { statement } of reads) expect(statement.Resource).toBe(secretArn);
  });

  it("passes cdk-nag with no unacknowledged finding", () => {
    expect(nagFindings(app)).toEqual([]);
  });

  it("names the missing context value", () => {
    expect(() => exampleApp({ databaseSecretArn: secretArn, vpcId: "vpc-1" })).toThrow(
      /context subnetIds is required/,
    );
  });
});

describe("OutboxRelay construct options", () => {
  type Props = ConstructorParameters<typeof OutboxRelay>[2];

  const constructStack = (extra?: (stack: Stack) => Partial<Props>) => outboxStack(extra).template;

  it("publishes to an existing FIFO queue: no queue created, SendMessage on its ARN, 256 KiB messages", () => {
    const template = constructStack((stack) => ({
      queue: sqs.Queue.fromQueueArn(stack, "Orders", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"),
    }));
    template.resourceCountIs("AWS::SQS::Queue", 0);
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          RELAY_MAX_MESSAGE_BYTES: "262144",
          OUTBOX_QUEUE_URL: Match.anyValue(),
        }),
      },
    });
    const sends = identityStatements(template).filter(({ statement }) =>
      asArray(statement.Action as string | string[]).includes("sqs:SendMessage"),
    );
    expect(sends.map(({ statement }) => [statement.Action, statement.Resource])).toEqual([
      [["sqs:GetQueueAttributes", "sqs:SendMessage"], "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"],
    ]);
    // No consumer dead-letter queue of ours, so no alarm on one; the stalled-consumers alarm reads the queue.
    template.resourceCountIs("AWS::CloudWatch::Alarm", 14);
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateAgeOfOldestMessage",
      Dimensions: [{ Name: "QueueName", Value: "orders.fifo" }],
    });
  });

  it("refuses a standard (non-FIFO) queue", () => {
    expect(() =>
      constructStack((stack) => ({
        queue: sqs.Queue.fromQueueArn(stack, "Std", "arn:aws:sqs:eu-west-1:123456789012:orders"),
      })),
    ).toThrow(/must be a FIFO queue/);
  });

  it("encrypts the queues with a customer key and lets the relay use it for sending", () => {
    const template = constructStack((stack) => ({
      queueEncryptionKey: new kms.Key(stack, "QueueKey", { enableKeyRotation: true }),
    }));
    const keyArn = { "Fn::GetAtt": [logicalId(template, "AWS::KMS::Key", "QueueKey"), "Arn"] };
    template.hasResourceProperties("AWS::SQS::Queue", { KmsMasterKeyId: keyArn, FifoQueue: true });
    const kmsGrants = identityStatements(template).filter(({ statement }) =>
      asArray(statement.Action as string | string[]).includes("kms:GenerateDataKey"),
    );
    expect(
      kmsGrants.map(({ source, statement }) => [source.replace(/[0-9A-F]{8}$/, ""), statement.Resource]),
    ).toEqual([["OutboxRelayRoleDefaultPolicy", keyArn]]);
  });

  it("derives the relay Lambda's timeout, dwell and concurrency from the schedule and the timeouts", () => {
    const template = constructStack(() => ({
      relaySchedule: Duration.minutes(5),
      relay: {
        publishTimeoutMs: 4_000,
        statementTimeoutMs: 3_000,
        mode: "drain",
        batchSize: 250,
        reservedConcurrency: true,
      },
    }));
    template.hasResourceProperties("AWS::Lambda::Function", {
      // 300 s + 60 s jitter + 10 s hand-over allowance + 13 s round reserve (4 + 3 x 3) + 5 s margin + 5 s slack
      Timeout: 393,
      ReservedConcurrentExecutions: 2, // ceil((393 + 60) / 300)
      Environment: {
        Variables: Match.objectLike({
          RELAY_MAX_DURATION_MS: "383000",
          RELAY_MODE: "drain",
          RELAY_BATCH_SIZE: "250",
          RELAY_PUBLISH_TIMEOUT_MS: "4000",
          RELAY_STATEMENT_TIMEOUT_MS: "3000",
        }),
      },
    });
    template.hasResourceProperties("AWS::Events::Rule", { ScheduleExpression: "rate(5 minutes)" });
  });

  it("evaluates the backlog alarms over the metrics schedule, and notifies a given topic", () => {
    const template = constructStack((stack) => ({
      alarms: { topic: new sns.Topic(stack, "Pager"), pendingEvents: 50 },
      purge: {
        schedule: Duration.hours(6),
        metricsSchedule: Duration.minutes(5),
        reservedConcurrency: true,
      },
    }));
    const topic = { Ref: logicalId(template, "AWS::SNS::Topic", "Pager") };
    template.hasResourceProperties("AWS::Events::Rule", { ScheduleExpression: "rate(6 hours)" });
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(5 minutes)",
      Targets: [Match.objectLike({ Input: '{"snapshotOnly":true}' })],
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Timeout: 300,
      ReservedConcurrentExecutions: 2,
      Environment: {
        Variables: Match.objectLike({
          PURGE_RETENTION_HOURS: "168",
          PURGE_BATCH_SIZE: "5000",
          PURGE_DEAD_LETTER_RETENTION_HOURS: Match.absent(),
          POWERTOOLS_SERVICE_NAME: "Consumer-Outbox-purge",
        }),
      },
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "PendingEvents",
      Threshold: 50,
      Period: 300,
      EvaluationPeriods: 1,
      AlarmActions: [topic],
    });
    // The snapshot's silence alarm on the same period: ceil((300 + 60 s jitter) / 300) + 1 = 3 empty periods,
    // each filled with 0 so the third pages (not the fifth, CloudWatch's evaluation range for 3).
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      Metrics: [
        Match.objectLike({ Expression: "FILL(snapshots, 0)" }),
        Match.objectLike({
          Id: "snapshots",
          MetricStat: Match.objectLike({
            Metric: Match.objectLike({ MetricName: "PendingEvents" }),
            Period: 300,
          }),
        }),
      ],
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
      TreatMissingData: "breaching",
      AlarmActions: [topic],
    });
    template.resourceCountIs("AWS::SNS::Topic", 1);
  });

  /** The one Lambda function whose logical id starts with `prefix`. */
  function functionProps(template: Template, prefix: string) {
    const id = logicalId(template, "AWS::Lambda::Function", prefix);
    return (template.toJSON().Resources[id] as Resource).Properties as Record<string, unknown> & {
      Environment: { Variables: Record<string, unknown> };
    };
  }

  it("starts N relays per tick from one rule, reserving N times the per-relay concurrency", () => {
    const template = constructStack(() => ({ relays: 3, relay: { reservedConcurrency: true } }));
    const relayId = logicalId(template, "AWS::Lambda::Function", "OutboxRelayFunction");
    const [, rule] = resources(template, "AWS::Events::Rule").find(([id]) =>
      id.startsWith("OutboxRelaySchedule"),
    ) as [string, Resource];
    const ruleTargets = rule.Properties?.Targets as { Id: string; Arn: unknown }[];
    expect(ruleTargets.map((t) => t.Arn)).toEqual(Array(3).fill({ "Fn::GetAtt": [relayId, "Arn"] }));
    expect(new Set(ruleTargets.map((t) => t.Id)).size).toBe(3);
    // Three hand-over slots, one per target.
    expect(ruleTargets.map((t) => (t as { Input?: string }).Input)).toEqual(
      [0, 1, 2].map((relaySlot) => JSON.stringify({ relaySlot })),
    );
    expect(functionProps(template, "OutboxRelayFunction").ReservedConcurrentExecutions).toBe(12);
    expect(() => constructStack(() => ({ relays: 6 }))).toThrow(/relays must be an integer from 1 to 5/);
  });

  it("scales PendingBacklog to a minute of the relays' target rate (issue 40, item 11)", () => {
    const template = constructStack(() => ({ relays: 2, relay: { targetEventsPerSecond: 1_000 } }));
    const [, alarm] = resources(template, "AWS::CloudWatch::Alarm").find(([id]) =>
      id.startsWith("OutboxPendingBacklogAlarm"),
    ) as [string, Resource];
    // 60 s x 1,000 events/s x 2 relays.
    expect(alarm.Properties?.Threshold).toBe(120_000);
  });

  it("exposes parallel rounds, idle polling and the round's byte budget, and sizes memory from them", () => {
    // A low throughput target (1,000 events/s: 384 MB), so the payloads decide the memory.
    const template = constructStack(() => ({
      relay: {
        parallelRounds: 4,
        idlePollMinMs: 20,
        idlePollMaxMs: 500,
        batchMaxBytes: 32 * MIB,
        targetEventsPerSecond: 1_000,
      },
    }));
    const relay = functionProps(template, "OutboxRelayFunction");
    expect(relay.Environment.Variables).toMatchObject({
      RELAY_PARALLEL_ROUNDS: "4",
      RELAY_IDLE_POLL_MIN_MS: "20",
      RELAY_IDLE_POLL_MAX_MS: "500",
      RELAY_BATCH_MAX_BYTES: String(32 * MIB),
    });
    // 256 + 3 x 4 x 32 = 640 MB.
    expect(relay.MemorySize).toBe(640);
    // The default budget (16 MiB) with 8 rounds: 256 + 3 x 8 x 16 = 640 MB.
    expect(
      functionProps(
        constructStack(() => ({ relay: { parallelRounds: 8, targetEventsPerSecond: 1_000 } })),
        "OutboxRelayFunction",
      ).MemorySize,
    ).toBe(640);
    // Below the throughput target's 1,024 MB but above what payloads need: accepted, it only publishes less.
    expect(
      functionProps(
        constructStack(() => ({ relay: { memorySize: 512, targetEventsPerSecond: 3_000 } })),
        "OutboxRelayFunction",
      ).MemorySize,
    ).toBe(512);
    expect(
      functionProps(
        constructStack(() => ({ relay: { targetEventsPerSecond: 6_000 } })),
        "OutboxRelayFunction",
      ).MemorySize,
    ).toBe(1_984);
    expect(() => constructStack(() => ({ relay: { targetEventsPerSecond: 10_000 } }))).toThrow(
      /relay.targetEventsPerSecond 10000 is over the 6000 events\/s one relay invocation reaches/,
    );
    expect(() => constructStack(() => ({ relay: { memorySize: 384 } }))).toThrow(
      /relay.memorySize 384 MB is below the 448 MB that 4 parallel rounds of 16777216 payload bytes need/,
    );
    expect(() => constructStack(() => ({ relay: { parallelRounds: 0 } }))).toThrow(
      /relay.parallelRounds must be an integer from 1 to 16, got 0/,
    );
    expect(() => constructStack(() => ({ relay: { idlePollMinMs: 300, idlePollMaxMs: 200 } }))).toThrow(
      /relay.idlePollMaxMs must be an integer from 300 to 60000, got 200/,
    );
  });

  it("lets the purge reserve nothing (accounts with a concurrency quota of 10), or a given number", () => {
    const none = functionProps(
      constructStack(() => ({
        purge: { reservedConcurrency: false },
        relay: { reservedConcurrency: false },
      })),
      "OutboxPurgeFunction",
    );
    expect(none.ReservedConcurrentExecutions).toBeUndefined();
    const one = functionProps(
      constructStack(() => ({ purge: { reservedConcurrency: 1 } })),
      "OutboxPurgeFunction",
    );
    expect(one.ReservedConcurrentExecutions).toBe(1);
    expect(() => constructStack(() => ({ purge: { reservedConcurrency: 0 } }))).toThrow(
      /purge.reservedConcurrency must be an integer from 1 to 1000, got 0/,
    );
  });

  it("gives two instances in one account their own metrics and alarms, and refuses two that would share them", () => {
    const stack = new Stack(newApp(), "Shop");
    const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
      vpcId: "vpc-0123456789abcdef0",
      availabilityZones: ["eu-west-1a"],
      privateSubnetIds: ["subnet-0123456789abcdef0"],
    });
    const secret = secretsmanager.Secret.fromSecretCompleteArn(
      stack,
      "Secret",
      "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf",
    );
    const orders = new OutboxRelay(stack, "Orders", { database: { secret, vpc }, migrations: false });
    const billing = new OutboxRelay(stack, "Billing", { database: { secret, vpc }, migrations: false });
    expect([orders.relayServiceName, billing.relayServiceName]).toEqual([
      "Shop-Orders-relay",
      "Shop-Billing-relay",
    ]);
    const template = Template.fromStack(stack);
    for (const service of ["Shop-Orders-purge", "Shop-Billing-purge"]) {
      template.hasResourceProperties("AWS::CloudWatch::Alarm", {
        MetricName: "PendingEvents",
        Dimensions: [{ Name: "service", Value: service }],
      });
    }
    expect(
      () =>
        new OutboxRelay(stack, "Again", {
          database: { secret, vpc },
          migrations: false,
          serviceName: "Shop-Orders",
        }),
    ).toThrow(
      /metrics namespace "OutboxRelay" and serviceName "Shop-Orders" are already used by Shop\/Orders/,
    );
  });

  it("optionally makes the relay the queue's only producer, and lets only the queue redrive into its DLQ", () => {
    const template = constructStack(() => ({ restrictSendToRelay: true }));
    const queueId = logicalId(template, "AWS::SQS::Queue", "OutboxQueue");
    const relayRole = { "Fn::GetAtt": [logicalId(template, "AWS::IAM::Role", "OutboxRelayRole"), "Arn"] };
    template.hasResourceProperties("AWS::SQS::QueuePolicy", {
      Queues: [{ Ref: queueId }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: "OnlyTheOutboxRelaySends",
            Effect: "Deny",
            Principal: { AWS: "*" },
            Action: "sqs:SendMessage",
            Resource: { "Fn::GetAtt": [queueId, "Arn"] },
            Condition: { ArnNotEquals: { "aws:PrincipalArn": relayRole } },
          },
        ]),
      },
    });
    const queue = template.toJSON().Resources[queueId] as Resource;
    const queueName = queue.Properties?.QueueName as string;
    expect(queueName).toMatch(/^[\w-]{1,69}-queue\.fifo$/);
    template.hasResourceProperties("AWS::SQS::Queue", {
      RedriveAllowPolicy: {
        redrivePermission: "byQueue",
        sourceQueueArns: [
          {
            "Fn::Join": [
              "",
              [
                "arn:",
                { Ref: "AWS::Partition" },
                ":sqs:",
                { Ref: "AWS::Region" },
                ":",
                { Ref: "AWS::AccountId" },
                `:${queueName}`,
              ],
            ],
          },
        ],
      },
    });
    expect(() =>
      constructStack((stack) => ({
        restrictSendToRelay: true,
        queue: sqs.Queue.fromQueueArn(stack, "Orders", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"),
      })),
    ).toThrow(/restrictSendToRelay needs the queue created by the construct/);
  });

  it("grants the relay the key of an imported CMK-encrypted queue", () => {
    const keyArn = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    const template = constructStack((stack) => ({
      queue: sqs.Queue.fromQueueAttributes(stack, "Orders", {
        queueArn: "arn:aws:sqs:eu-west-1:123456789012:orders.fifo",
        fifo: true,
        keyArn,
      }),
    }));
    const kmsGrants = identityStatements(template).filter(({ statement }) =>
      asArray(statement.Action as string | string[]).includes("kms:GenerateDataKey"),
    );
    expect(kmsGrants.map(({ statement }) => [statement.Action, statement.Resource])).toEqual([
      [["kms:Decrypt", "kms:GenerateDataKey"], keyArn],
    ]);
  });
});
