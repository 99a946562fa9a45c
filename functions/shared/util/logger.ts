/**
 * The subset of Powertools Logger (or any console-like logger) the library uses: a message and structured
 * fields. The relay, the purge and the consumer all take this one type, so one logger object fits all three.
 */
export interface Logger {
  info(message: string, fields: Record<string, unknown>): void;
  warn(message: string, fields: Record<string, unknown>): void;
  error(message: string, fields: Record<string, unknown>): void;
}
