import type { SessionClient, SessionPool } from "../db/session.ts";
import { ConfigError } from "../outbox/errors.ts";
import type { OutboxNames } from "../outbox/names.ts";
import { checkIntegerOption } from "../util/env.ts";
import type { InboxLogger } from "./inboxLogger.ts";
import { type InboxLocation, inboxNames } from "./inboxTable.ts";
import type { InboxMetrics } from "./outcomeMetrics.ts";
import { isPayloadParser } from "./payloadParser.ts";
import type { RecordOutcome } from "./recordOutcome.ts";

/**
 * createInboxHandler's options, their defaults, and their validation: all checked when the handler is created,
 * in one place, so a misconfigured consumer fails at its cold start with an error naming the option (and the
 * limit) instead of failing each record. The order of the checks is the order their errors have always come in.
 */

export interface InboxHandlerOptions extends InboxLocation {
  /** The consumer's database (a pg.Pool fits). One of `pool` or `withClient`. */
  pool?: SessionPool;
  /** Lends a session for `work` and takes it back (e.g. an RDS Proxy pool of your own). */
  withClient?: <T>(work: (client: SessionClient) => Promise<T>) => Promise<T>;
  /**
   * This consumer's name: it keys the deduplication and the stale-event mark, so several consumers can share
   * one database and inbox table. Default "default" (what the rows of an inbox created before names existed
   * belong to). 1-100 characters.
   */
  consumer?: string;
  /**
   * "apply" (default) runs every new event; "skip" acknowledges without running an event whose outbox `seq`
   * is lower than the highest this consumer applied for its aggregate from the same origin (InboxEvent.origin:
   * the outbox that assigned the seq) (outcome "stale").
   */
  staleEvents?: "apply" | "skip";
  logger?: InboxLogger;
  /**
   * A Powertools Metrics instance (or anything with addMetric and publishStoredMetrics): each invocation adds
   * one count per outcome (InboxRecordsProcessed, ...Duplicate, ...Stale, ...Ignored, ...Failed, ...Skipped)
   * and publishes the stored metrics (yours too) as EMF when it ends.
   */
  metrics?: InboxMetrics;
  /** Message groups processed at the same time; each takes one database session. Default 4 (1-10). */
  groupConcurrency?: number;
  /**
   * statement_timeout and idle_in_transaction_session_timeout of each record's transaction. Default 10,000 ms.
   * A record starts only while the invocation has this long plus one second left.
   */
  statementTimeoutMs?: number;
  /** Attempts of a record whose transaction fails with 40001 or 40P01. Default 3 (1-10). */
  maxAttempts?: number;
  /** With routes: an event type without a route fails its record (default) or is recorded and skipped. */
  unknownEventTypes?: "fail" | "ignore";
  onOutcome?: (outcome: RecordOutcome) => void;
}

export const DEFAULT_GROUP_CONCURRENCY = 4;
export const DEFAULT_INBOX_STATEMENT_TIMEOUT_MS = 10_000;
export const DEFAULT_CONSUMER = "default";
export const DEFAULT_MAX_ATTEMPTS = 3;

/** Where each record's transaction gets its session: exactly one of the two. */
export type InboxSession =
  | { pool: SessionPool; withClient?: undefined }
  | { pool?: undefined; withClient: <T>(work: (client: SessionClient) => Promise<T>) => Promise<T> };

/** The options with their defaults applied, every one checked. */
export interface InboxSettings {
  names: OutboxNames;
  consumer: string;
  skipStale: boolean;
  groupConcurrency: number;
  statementTimeoutMs: number;
  maxAttempts: number;
  session: InboxSession;
}

/** Throws a ConfigError naming the first bad option. */
export function inboxSettings(options: InboxHandlerOptions & { parse?: unknown }): InboxSettings {
  const names = inboxNames(options);
  const groupConcurrency = options.groupConcurrency ?? DEFAULT_GROUP_CONCURRENCY;
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_INBOX_STATEMENT_TIMEOUT_MS;
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const consumer = options.consumer ?? DEFAULT_CONSUMER;
  const skipStale = checkChoice("staleEvents", options.staleEvents ?? "apply", ["apply", "skip"]) === "skip";
  // Ten is the most a FIFO event source hands over in one batch: more could never run.
  checkIntegerOption("groupConcurrency", groupConcurrency, 1, 10);
  checkIntegerOption("statementTimeoutMs", statementTimeoutMs, 100, 900_000);
  checkIntegerOption("maxAttempts", maxAttempts, 1, 10);
  if (typeof consumer !== "string" || consumer.length < 1 || consumer.length > 100) {
    throw new ConfigError(
      `createInboxHandler: consumer must be a string of 1 to 100 characters, got ${JSON.stringify(consumer)}`,
    );
  }
  if (options.parse !== undefined && !isPayloadParser(options.parse)) {
    throw new ConfigError("createInboxHandler: parse must be a Standard Schema (~standard) or a function");
  }
  const { pool, withClient } = options;
  if ((pool === undefined) === (withClient === undefined)) {
    throw new ConfigError("createInboxHandler: pass exactly one of options.pool and options.withClient");
  }
  const session: InboxSession =
    pool !== undefined ? { pool } : { withClient: withClient as NonNullable<typeof withClient> };
  return { names, consumer, skipStale, groupConcurrency, statementTimeoutMs, maxAttempts, session };
}

function checkChoice<T extends string>(name: string, value: T, choices: readonly T[]): T {
  if (!choices.includes(value)) {
    throw new ConfigError(
      `createInboxHandler: ${name} must be one of ${choices.map((c) => JSON.stringify(c)).join(", ")}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}
