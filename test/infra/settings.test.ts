import { readdir, readFile } from "node:fs/promises";
import { Duration, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as events from "aws-cdk-lib/aws-events";
import { describe, expect, it } from "vitest";
import { databaseSourceFromEnv } from "../../functions/shared/db/connection.ts";
import { MIGRATE_SETTINGS } from "../../functions/shared/db/migrate.ts";
import { DATABASE_SETTINGS } from "../../functions/shared/db/settings.ts";
import {
  CLAIM_CHECK_SETTINGS,
  claimCheckSettingFromEnv,
} from "../../functions/shared/destinations/claimCheck/settings.ts";
import {
  DESTINATION_SETTINGS,
  destinationSettingFromEnv,
} from "../../functions/shared/destinations/setting.ts";
import { relayMetricsOptionsFromEnv } from "../../functions/shared/observe/metrics.ts";
import { METRICS_SETTINGS } from "../../functions/shared/observe/settings.ts";
import { ConfigError } from "../../functions/shared/outbox/errors.ts";
import { OUTBOX_LOCATION_SETTINGS, outboxLocationFromEnv } from "../../functions/shared/outbox/names.ts";
import { PURGE_SETTINGS, purgeConfigFromEnv } from "../../functions/shared/purge/settings.ts";
import { RELAY_SETTINGS, relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import {
  booleanSetting,
  choiceSetting,
  envHelp,
  integerSetting,
  isSet,
  readBoolean,
  readChoice,
  readInteger,
  readText,
  type SettingsTable,
  settingRows,
  settingText,
  textSetting,
} from "../../functions/shared/util/settings.ts";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { relayTiming } from "../../infra/relayTiming.ts";
import {
  importedNetwork,
  newApp,
  type OutboxRelayProps,
  type Resource,
  resources,
} from "../support/template.ts";

const TABLES: SettingsTable[] = [
  RELAY_SETTINGS,
  PURGE_SETTINGS,
  DESTINATION_SETTINGS,
  DATABASE_SETTINGS,
  OUTBOX_LOCATION_SETTINGS,
  METRICS_SETTINGS,
  MIGRATE_SETTINGS,
  CLAIM_CHECK_SETTINGS,
];
const KNOWN = new Set(settingRows(...TABLES).map((row) => row.env));

describe("settings rows: the readers", () => {
  const size = integerSetting({ env: "SIZE", default: 10, min: 1, max: 100, doc: "a size" });
  const cap = integerSetting({ env: "CAP", default: undefined, min: 5, max: 9, doc: "unset: no cap" });

  it("reads an integer, its default when unset or blank, and undefined for a row without one", () => {
    expect(readInteger({}, size)).toBe(10);
    expect(readInteger({ SIZE: " " }, size)).toBe(10);
    expect(readInteger({ SIZE: "0100" }, size)).toBe(100);
    expect(readInteger({}, cap)).toBeUndefined();
    expect(readInteger({ CAP: "7" }, cap)).toBe(7);
  });

  it("refuses an integer out of its range or not an integer, naming the variable and the limits", () => {
    for (const value of ["0", "101", "1.5", "ten"]) {
      expect(() => readInteger({ SIZE: value }, size)).toThrow(ConfigError);
      expect(() => readInteger({ SIZE: value }, size)).toThrow(
        `SIZE must be an integer from 1 to 100, got ${JSON.stringify(value)}`,
      );
    }
    expect(() => readInteger({ CAP: "4" }, cap)).toThrow("CAP must be an integer from 5 to 9");
  });

  it("reads booleans, choices and text with their defaults, and names the variable when refusing", () => {
    const flag = booleanSetting({ env: "FLAG", default: false, doc: "a flag" });
    const mode = choiceSetting({ env: "MODE", default: "a", choices: ["a", "b"], doc: "a mode" });
    const name = textSetting({ env: "NAME", default: "n", doc: "a name" });
    expect([
      readBoolean({}, flag),
      readBoolean({ FLAG: "yes" }, flag),
      readBoolean({ FLAG: "0" }, flag),
    ]).toEqual([false, true, false]);
    expect(() => readBoolean({ FLAG: "maybe" }, flag)).toThrow('FLAG must be true or false, got "maybe"');
    expect([readChoice({}, mode), readChoice({ MODE: "b" }, mode)]).toEqual(["a", "b"]);
    expect(() => readChoice({ MODE: "c" }, mode)).toThrow('MODE must be one of a, b, got "c"');
    expect([readText({}, name), readText({ NAME: " x " }, name)]).toEqual(["n", "x"]);
    expect([isSet({}, name), isSet({ NAME: "" }, name), isSet({ NAME: "x" }, name)]).toEqual([
      false,
      false,
      true,
    ]);
  });

  it("checks a value given in code against the row, naming the prop", () => {
    expect(settingText("Thing size", size, 42)).toBe("42");
    expect(() => settingText("Thing size", size, 0)).toThrow(
      "Thing size must be an integer from 1 to 100, got 0",
    );
    const mode = choiceSetting({ env: "MODE", default: "a", choices: ["a", "b"], doc: "a mode" });
    expect(() => settingText("Thing mode", mode, "c")).toThrow('Thing mode must be one of a, b, got "c"');
    expect([envHelp(size), envHelp(cap)]).toEqual(["env SIZE, default 10", "env CAP"]);
  });

  it("gives every variable one row, in one table", () => {
    const names = settingRows(...TABLES).map((row) => row.env);
    expect(names.length).toBe(new Set(names).size);
    for (const row of settingRows(...TABLES)) {
      expect(row.doc, row.env).not.toBe("");
      if (row.kind === "integer" && row.default !== undefined) {
        expect(row.default, row.env).toBeGreaterThanOrEqual(row.min);
        expect(row.default, row.env).toBeLessThanOrEqual(row.max);
      }
    }
  });
});

describe("settings rows: what the Lambdas' readers do with them", () => {
  const relayBase: Env = {
    DATABASE_URL: "postgres://relay@localhost:5432/app",
    OUTBOX_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
  };
  const secretBase: Env = { DATABASE_SECRET_ARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db" };

  /** Each reader with an environment it accepts and the tables whose rows it reads. */
  const readers: [string, (env: Env) => unknown, Env, SettingsTable[]][] = [
    ["relayConfigFromEnv", relayConfigFromEnv, relayBase, [RELAY_SETTINGS]],
    [
      "claimCheckSettingFromEnv",
      claimCheckSettingFromEnv,
      { OUTBOX_PAYLOAD_BUCKET: "b" },
      [CLAIM_CHECK_SETTINGS],
    ],
    ["purgeConfigFromEnv", purgeConfigFromEnv, relayBase, [PURGE_SETTINGS]],
    ["destinationSettingFromEnv", destinationSettingFromEnv, relayBase, [DESTINATION_SETTINGS]],
    ["databaseSourceFromEnv", databaseSourceFromEnv, secretBase, [DATABASE_SETTINGS]],
    ["relayMetricsOptionsFromEnv", relayMetricsOptionsFromEnv, {}, [METRICS_SETTINGS]],
  ];

  it.each(readers)(
    "%s refuses each integer row's out-of-range values naming the variable and the limits",
    (_, read, base, tables) => {
      const rows = settingRows(...tables).filter((row) => row.kind === "integer");
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        for (const value of [row.min - 1, row.max + 1]) {
          expect(() => read({ ...base, [row.env]: String(value) }), `${row.env}=${value}`).toThrow(
            `${row.env} must be an integer from ${row.min} to ${row.max}, got "${value}"`,
          );
        }
      }
    },
  );

  it.each(readers)(
    "%s refuses a choice or boolean row's unknown value naming the variable",
    (_, read, base, tables) => {
      for (const row of settingRows(...tables)) {
        if (row.kind === "choice") {
          expect(() => read({ ...base, [row.env]: "neither" })).toThrow(`${row.env} must be one of`);
        }
        if (row.kind === "boolean") {
          expect(() => read({ ...base, [row.env]: "maybe" })).toThrow(`${row.env} must be true or false`);
        }
      }
    },
  );

  it("reads the tables' defaults when nothing is set", () => {
    const r = RELAY_SETTINGS;
    const relay = relayConfigFromEnv(relayBase);
    expect(relay.relay).toEqual({
      mode: r.mode.default,
      batchSize: r.batchSize.default,
      concurrency: r.concurrency.default,
      maxAttempts: r.maxAttempts.default,
      backoffBaseMs: r.backoffBaseMs.default,
      backoffMaxMs: r.backoffMaxMs.default,
      strictOrder: r.strictOrder.default,
      batchMaxBytes: r.batchMaxBytes.default,
      publishTimeoutMs: r.publishTimeoutMs.default,
      statementTimeoutMs: r.statementTimeoutMs.default,
      idlePollMinMs: r.idlePollMinMs.default,
      idlePollMaxMs: r.idlePollMaxMs.default,
      parallelRounds: r.parallelRounds.default,
      retention: r.retention.default,
    });
    expect(relay).toMatchObject({ budgetMarginMs: r.budgetMarginMs.default, listen: r.listen.default });
    expect(relay).not.toHaveProperty("maxDurationMs");
    expect(relay.destination).toMatchObject({
      maxMessageBytes: DESTINATION_SETTINGS.maxMessageBytes.default,
    });
    const p = PURGE_SETTINGS;
    expect(purgeConfigFromEnv(relayBase)).toMatchObject({
      purge: {
        retentionHours: p.retentionHours.default,
        deadLetterRetentionHours: null,
        batchSize: p.batchSize.default,
        statementTimeoutMs: p.statementTimeoutMs.default,
        pausePercent: p.pausePercent.default,
      },
      budgetMarginMs: 10_000,
    });
    expect(databaseSourceFromEnv(secretBase)).toMatchObject({
      tls: DATABASE_SETTINGS.sslmode.default,
      caFile: DATABASE_SETTINGS.caFile.default,
      ttlMs: DATABASE_SETTINGS.secretTtlSeconds.default * 1000,
    });
  });
});

/** The Lambda function whose logical id is `Outbox<name>Function` plus CDK's hash. */
function functionEnvironment(template: Template, name: string): Record<string, unknown> {
  const pattern = new RegExp(`^Outbox${name}Function[0-9A-F]{8}$`);
  const found = resources(template, "AWS::Lambda::Function").filter(([id]) => pattern.test(id));
  expect(found, name).toHaveLength(1);
  const [, fn] = found[0] as [string, Resource];
  const environment = fn.Properties?.Environment as { Variables: Record<string, unknown> } | undefined;
  return environment?.Variables ?? {};
}

/**
 * The environment as the Lambda would see it. Values known only at deploy time (the created queue's URL is a
 * `Ref`) become a sample of what CloudFormation gives; any other token fails, since a reader cannot check it.
 */
const DEPLOY_TIME_SAMPLES: Record<string, string> = {
  [DESTINATION_SETTINGS.queueUrl.env]: "https://sqs.eu-west-1.amazonaws.com/123456789012/outbox-queue.fifo",
};

function asDeployed(variables: Record<string, unknown>): Env {
  const env: Env = {};
  for (const [name, value] of Object.entries(variables)) {
    if (typeof value === "string") env[name] = value;
    else if (DEPLOY_TIME_SAMPLES[name] !== undefined) env[name] = DEPLOY_TIME_SAMPLES[name];
    else throw new Error(`${name} is a deploy-time token with no sample: ${JSON.stringify(value)}`);
  }
  return env;
}

function synth(props: (stack: Stack) => Partial<OutboxRelayProps> = () => ({})) {
  const stack = new Stack(newApp(), "Settings");
  const { vpc, secret } = importedNetwork(stack);
  const extra = props(stack);
  new OutboxRelay(stack, "Outbox", { ...extra, database: { secret, vpc, ...extra.database } });
  const template = Template.fromStack(stack);
  return {
    relay: asDeployed(functionEnvironment(template, "Relay")),
    purge: asDeployed(functionEnvironment(template, "Purge")),
    migrate: asDeployed(functionEnvironment(template, "Migrate")),
    secretArn: secret.secretArn,
  };
}

describe("the construct's environment, read back by the handlers' readers", () => {
  it("writes only known variables with the default props, and the handlers take them, defaults included", () => {
    const { relay, purge, migrate, secretArn } = synth();
    for (const [fn, env] of Object.entries({ relay, purge, migrate })) {
      for (const name of Object.keys(env)) expect(KNOWN, `${fn}: ${name}`).toContain(name);
    }

    const relayConfig = relayConfigFromEnv(relay);
    expect(relayConfig.database).toMatchObject({ kind: "secret", secretArn });
    expect(relayConfig.relay).toMatchObject({
      mode: "dwell",
      batchSize: RELAY_SETTINGS.batchSize.default,
      parallelRounds: RELAY_SETTINGS.parallelRounds.default,
      batchMaxBytes: RELAY_SETTINGS.batchMaxBytes.default,
    });
    expect(relayConfig.budgetMarginMs).toBe(RELAY_SETTINGS.budgetMarginMs.default);
    // The construct's own: dwell sized from the schedule (relayTiming.ts), the created queue's 1 MiB.
    expect(relayConfig.maxDurationMs).toBe(relayTiming({ scheduleSeconds: 60 }).maxDurationMs);
    expect(relayConfig.destination).toMatchObject({ kind: "sqs-fifo", maxMessageBytes: 1_048_576 });

    const purgeConfig = purgeConfigFromEnv(purge);
    expect(purgeConfig.database).toMatchObject({ kind: "secret", secretArn });
    expect(purgeConfig.purge).toMatchObject({
      retentionHours: 168,
      batchSize: 5_000,
      deadLetterRetentionHours: null,
    });
    // Not written: the handler's own default is the construct's.
    expect(purge).not.toHaveProperty(PURGE_SETTINGS.budgetMarginMs.env);
    expect(purgeConfig.budgetMarginMs).toBe(PURGE_SETTINGS.budgetMarginMs.default);

    expect(databaseSourceFromEnv(migrate)).toMatchObject({ kind: "secret", secretArn });
    expect(outboxLocationFromEnv(migrate)).toEqual({});
  });

  it("hands every non-default prop to the handlers as the value the construct meant", () => {
    const { relay, purge, migrate, secretArn } = synth(() => ({
      database: { databaseName: "orders" } as OutboxRelayProps["database"],
      outboxSchema: "sales",
      outboxTable: "sales_events",
      metricsNamespace: "Shop",
      serviceName: "shop",
      relay: {
        mode: "drain",
        batchSize: 100,
        concurrency: 10,
        maxAttempts: 3,
        backoffBaseMs: 2_000,
        backoffMaxMs: 60_000,
        strictOrder: true,
        maxMessageBytes: 524_288,
        batchMaxBytes: 8 * 1_048_576,
        parallelRounds: 2,
        idlePollMinMs: 20,
        idlePollMaxMs: 500,
        publishTimeoutMs: 4_000,
        statementTimeoutMs: 3_000,
        budgetMarginMs: 7_000,
        listen: true,
        retention: "delete",
      },
      purge: {
        retention: Duration.hours(48),
        deadLetterRetention: Duration.days(30),
        batchSize: 1_000,
        budgetMarginMs: 15_000,
      },
    }));
    for (const [fn, env] of Object.entries({ relay, purge, migrate })) {
      for (const name of Object.keys(env)) expect(KNOWN, `${fn}: ${name}`).toContain(name);
    }

    const relayConfig = relayConfigFromEnv(relay);
    expect(relayConfig).toMatchObject({
      database: { kind: "secret", secretArn, database: "orders" },
      destination: { kind: "sqs-fifo", maxMessageBytes: 524_288 },
      relay: {
        schema: "sales",
        table: "sales_events",
        mode: "drain",
        batchSize: 100,
        concurrency: 10,
        maxAttempts: 3,
        backoffBaseMs: 2_000,
        backoffMaxMs: 60_000,
        strictOrder: true,
        batchMaxBytes: 8 * 1_048_576,
        parallelRounds: 2,
        idlePollMinMs: 20,
        idlePollMaxMs: 500,
        publishTimeoutMs: 4_000,
        statementTimeoutMs: 3_000,
        retention: "delete",
      },
      budgetMarginMs: 7_000,
      listen: true,
    });
    // Derived by the construct from the schedule and the timeouts it was given.
    const timing = relayTiming({ scheduleSeconds: 60, publishTimeoutMs: 4_000, statementTimeoutMs: 3_000 });
    expect(relayConfig.maxDurationMs).toBe(timing.maxDurationMs);
    expect(readText(relay, METRICS_SETTINGS.namespace)).toBe("Shop");
    expect(readText(relay, METRICS_SETTINGS.serviceName)).toBe("shop-relay");

    expect(purgeConfigFromEnv(purge)).toMatchObject({
      database: { kind: "secret", secretArn, database: "orders" },
      purge: {
        schema: "sales",
        table: "sales_events",
        retentionHours: 48,
        deadLetterRetentionHours: 720,
        batchSize: 1_000,
      },
      budgetMarginMs: 15_000,
    });
    expect(readText(purge, METRICS_SETTINGS.serviceName)).toBe("shop-purge");

    expect(databaseSourceFromEnv(migrate)).toMatchObject({ kind: "secret", secretArn, database: "orders" });
    expect(outboxLocationFromEnv(migrate)).toEqual({ schema: "sales", table: "sales_events" });
  });

  it("hands a bus and its source to the relay, and nothing that applies only to a queue", () => {
    const busArn = "arn:aws:events:eu-west-1:123456789012:event-bus/orders";
    const { relay } = synth((stack) => ({
      destination: events.EventBus.fromEventBusArn(stack, "Bus", busArn),
      eventSource: "shop.orders",
    }));
    expect(relayConfigFromEnv(relay).destination).toEqual({
      kind: "eventbridge",
      eventBusName: busArn,
      source: "shop.orders",
    });
  });

  it("refuses at synth a prop the handler would refuse at cold start, naming the prop and the limits", () => {
    const cases: [Partial<OutboxRelayProps>, string][] = [
      [{ relay: { batchSize: 1_001 } }, "OutboxRelay relay.batchSize must be an integer from 1 to 1000"],
      [{ relay: { concurrency: 0 } }, "OutboxRelay relay.concurrency must be an integer from 1 to 100"],
      [
        { relay: { batchMaxBytes: 2 ** 31 - 1 } },
        "OutboxRelay relay.batchMaxBytes must be an integer from 1048576 to 1073741824",
      ],
      [{ purge: { batchSize: 50_001 } }, "OutboxRelay purge.batchSize must be an integer from 1 to 50000"],
      [
        { purge: { budgetMarginMs: -1 } },
        "OutboxRelay purge.budgetMarginMs must be an integer from 0 to 600000",
      ],
    ];
    for (const [props, message] of cases) expect(() => synth(() => props)).toThrow(message);
  });
});

describe("no setting is spelled outside its table", () => {
  it("leaves infra/ and cli/ no variable name as a string literal or an object key: they import the rows", async () => {
    const found: string[] = [];
    for (const dir of ["infra", "cli", "cli/commands"]) {
      for (const file of await readdir(new URL(`../../${dir}/`, import.meta.url))) {
        if (!file.endsWith(".ts")) continue;
        const source = await readFile(new URL(`../../${dir}/${file}`, import.meta.url), "utf8");
        for (const row of settingRows(...TABLES)) {
          const spelled = new RegExp(`["']${row.env}["']|^\\s+${row.env}\\s*:`, "m");
          if (spelled.test(source)) found.push(`${dir}/${file}: ${row.env}`);
        }
      }
    }
    expect(found).toEqual([]);
  });
});
