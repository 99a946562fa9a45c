import type { Logger } from "../functions/shared/util/logger.ts";

export type LogFormat = "text" | "json";

/**
 * The relay's log lines on stderr: JSON (one object per line, like the Lambda's Powertools logs) for containers
 * and log shippers, or short text for a terminal. stdout stays free for the final summary.
 */
export function createLogger(format: LogFormat, write = (line: string) => process.stderr.write(`${line}\n`)) {
  const log =
    (level: "INFO" | "WARN" | "ERROR") =>
    (message: string, fields: Record<string, unknown> = {}): void => {
      const timestamp = new Date().toISOString();
      if (format === "json") {
        write(JSON.stringify({ level, message, timestamp, ...fields }));
        return;
      }
      const details = Object.entries(fields)
        .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
        .join(" ");
      write(`${timestamp} ${level.padEnd(5)} ${message}${details === "" ? "" : ` ${details}`}`);
    };
  return { info: log("INFO"), warn: log("WARN"), error: log("ERROR") } satisfies Logger;
}

export function defaultLogFormat(): LogFormat {
  return process.stderr.isTTY ? "text" : "json";
}
