import type { Logger } from "../util/logger.ts";

/**
 * The logger the inbox writes to (a Powertools Logger fits). A module of its own because everything in the
 * consumer logs, the outcome metrics included: kept beside the handler, it tied them in an import cycle.
 */
export type InboxLogger = Logger;

/** A logger whose own failures are swallowed: logging must never change what happens to a record. */
export function safeLogger(logger: InboxLogger | undefined): InboxLogger {
  const call =
    (level: keyof InboxLogger) =>
    (message: string, fields: Record<string, unknown>): void => {
      try {
        logger?.[level](message, fields);
      } catch {
        // Nowhere left to report it: the logger is what failed.
      }
    };
  return { info: call("info"), warn: call("warn"), error: call("error") };
}
