import { describe, expect, it } from "vitest";
import { inboxSettings } from "../../functions/shared/consumer/inboxOptions.ts";
import {
  createInboxHandler,
  DEFAULT_CONSUMER,
  DEFAULT_GROUP_CONCURRENCY,
  DEFAULT_INBOX_STATEMENT_TIMEOUT_MS,
  DEFAULT_MAX_ATTEMPTS,
  type SessionPool,
} from "../../functions/shared/consumer/index.ts";
import { ConfigError } from "../../functions/shared/outbox/errors.ts";

/** Never connected: options are checked when the handler is created, before any record. */
const pool: SessionPool = {
  connect: () => Promise.reject(new Error("a unit test must not connect")),
};

describe("inboxSettings: createInboxHandler's options", () => {
  it("applies the documented defaults", () => {
    const settings = inboxSettings({ pool });
    expect(settings).toMatchObject({
      consumer: DEFAULT_CONSUMER,
      skipStale: false,
      groupConcurrency: DEFAULT_GROUP_CONCURRENCY,
      statementTimeoutMs: DEFAULT_INBOX_STATEMENT_TIMEOUT_MS,
      maxAttempts: DEFAULT_MAX_ATTEMPTS,
      session: { pool },
    });
    expect(settings.names.qualified).toBe('"public"."inbox"');
  });

  it("keeps what it is given when it is valid", () => {
    const withClient = <T>(work: (client: never) => Promise<T>) => work(undefined as never);
    const settings = inboxSettings({
      withClient,
      schema: "consumer",
      table: "received",
      consumer: "billing",
      staleEvents: "skip",
      groupConcurrency: 10,
      statementTimeoutMs: 100,
      maxAttempts: 1,
    });
    expect(settings).toMatchObject({
      consumer: "billing",
      skipStale: true,
      groupConcurrency: 10,
      statementTimeoutMs: 100,
      maxAttempts: 1,
      session: { withClient },
    });
    expect(settings.session.pool).toBeUndefined();
    expect(settings.names.qualified).toBe('"consumer"."received"');
  });

  it.each([
    [{ groupConcurrency: 0 }, "groupConcurrency must be an integer from 1 to 10, got 0"],
    [{ groupConcurrency: 11 }, "groupConcurrency must be an integer from 1 to 10, got 11"],
    [{ groupConcurrency: 2.5 }, "groupConcurrency must be an integer from 1 to 10, got 2.5"],
    [{ statementTimeoutMs: 99 }, "statementTimeoutMs must be an integer from 100 to 900000, got 99"],
    [{ statementTimeoutMs: 900_001 }, "statementTimeoutMs must be an integer from 100 to 900000, got 900001"],
    [{ maxAttempts: 0 }, "maxAttempts must be an integer from 1 to 10, got 0"],
    [{ maxAttempts: 11 }, "maxAttempts must be an integer from 1 to 10, got 11"],
    [{ consumer: "" }, 'createInboxHandler: consumer must be a string of 1 to 100 characters, got ""'],
    [{ consumer: "c".repeat(101) }, "createInboxHandler: consumer must be a string of 1 to 100 characters"],
    [{ consumer: 7 }, "createInboxHandler: consumer must be a string of 1 to 100 characters, got 7"],
    [{ staleEvents: "drop" }, 'createInboxHandler: staleEvents must be one of "apply", "skip", got "drop"'],
    [{ parse: "zod" }, "createInboxHandler: parse must be a Standard Schema (~standard) or a function"],
    [{ parse: { "~standard": {} } }, "createInboxHandler: parse must be a Standard Schema"],
    [{ table: "in;box" }, 'table: "in;box" is not an accepted identifier'],
    [{ schema: "1st" }, 'schema: "1st" is not an accepted identifier'],
  ])("refuses %o with a ConfigError naming it", (bad, message) => {
    const attempt = () => inboxSettings({ pool, ...(bad as object) });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(message);
  });

  it("accepts the longest consumer name and the limits themselves", () => {
    expect(() =>
      inboxSettings({ pool, consumer: "c".repeat(100), groupConcurrency: 1, statementTimeoutMs: 900_000 }),
    ).not.toThrow();
  });

  it("needs exactly one of pool and withClient", () => {
    const withClient = <T>(work: (client: never) => Promise<T>) => work(undefined as never);
    const message = "createInboxHandler: pass exactly one of options.pool and options.withClient";
    expect(() => inboxSettings({})).toThrow(message);
    expect(() => inboxSettings({ pool, withClient })).toThrow(message);
  });

  it("reports the first bad option in the order createInboxHandler always checked them", () => {
    expect(() => inboxSettings({ table: "in;box", groupConcurrency: 0 })).toThrow(/table:/);
    expect(() => inboxSettings({ staleEvents: "x" as never, groupConcurrency: 0 })).toThrow(/staleEvents/);
    expect(() => inboxSettings({ groupConcurrency: 0, maxAttempts: 0 })).toThrow(/groupConcurrency/);
    expect(() => inboxSettings({ maxAttempts: 0, consumer: "" })).toThrow(/maxAttempts/);
    expect(() => inboxSettings({ consumer: "", parse: 1 })).toThrow(/consumer/);
    expect(() => inboxSettings({ parse: 1 })).toThrow(/parse must be/);
  });

  it("is what createInboxHandler runs: a bad option fails at creation, before the routes are looked at", () => {
    expect(() =>
      createInboxHandler({ "order.placed": "not a function" } as never, { pool, maxAttempts: 0 }),
    ).toThrow(/maxAttempts must be an integer/);
    expect(() => createInboxHandler(() => {}, {})).toThrow(/exactly one of options.pool/);
    expect(typeof createInboxHandler(() => {}, { pool })).toBe("function");
  });
});
