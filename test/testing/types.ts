/**
 * A type test: compiled by `npm run typecheck` (tsc --noEmit), never run. The records and events the testing
 * helpers build are `@types/aws-lambda`'s SQSRecord and SQSEvent, so a handler typed `SQSHandler` (as README's
 * consumer is) takes them without a cast: Lambda's type requires SenderId, ApproximateFirstReceiveTimestamp and
 * md5OfBody, which the inbox's own input type leaves optional.
 */
import type { Context, SQSEvent, SQSHandler, SQSRecord } from "aws-lambda";
import pg from "pg";
import { createInboxHandler } from "../../functions/shared/consumer/index.ts";
import {
  eventBridgeRecordOf,
  type OutboxRowLike,
  sqsEventOf,
  sqsRecordFromMessage,
  sqsRecordOf,
} from "../../functions/shared/testing/index.ts";

declare const row: OutboxRowLike;
declare const context: Context;
const pool = new pg.Pool();

export const handler: SQSHandler = createInboxHandler(() => {}, { pool });
export const record: SQSRecord = sqsRecordOf(row);
export const fromMessage: SQSRecord = sqsRecordFromMessage({ MessageId: "m-1", Body: "{}" });
export const event: SQSEvent = sqsEventOf(sqsRecordOf(row), eventBridgeRecordOf(row, { source: "orders" }));
export const result = handler(sqsEventOf(sqsRecordOf(row, { receiveCount: 2 })), context, () => {});
