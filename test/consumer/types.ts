/**
 * A type test (finding 6): compiled by `npm run typecheck` (tsc --noEmit), never run. Each line is ordinary
 * user code that must type-check without casts; each `@ts-expect-error` is a mistake the types must catch
 * (tsc fails if the line below it compiles). Imports the consumer's public entry (what the package's
 * `./consumer` export is built from) and `@types/aws-lambda` as a user's project has it.
 */
import type {
  Context,
  Handler,
  KinesisStreamEvent,
  KinesisStreamHandler,
  SQSBatchResponse,
  SQSEvent,
  SQSHandler,
  SQSRecord,
} from "aws-lambda";
import pg from "pg";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxRecordHandler,
  type InboxRoutes,
  inboxRoute,
  parseInboxEvent,
  type SqsEvent,
  type SqsRecord,
  type StandardSchemaV1,
} from "../../functions/shared/consumer/index.ts";

interface Order {
  orderId: string;
  total: number;
}

declare const sqsEvent: SQSEvent;
declare const sqsRecord: SQSRecord;
declare const context: Context;
const pool = new pg.Pool();

// aws-lambda's event and record are the inbox's.
export const event: SqsEvent = sqsEvent;
export const record: SqsRecord = sqsRecord;
export const parsed: InboxEvent = parseInboxEvent(sqsRecord);

// A created handler is an SQSHandler, and a Handler<SQSEvent, SQSBatchResponse>.
export const handler: SQSHandler = createInboxHandler(() => {}, { pool });
export const handler2: Handler<SQSEvent, SQSBatchResponse> = createInboxHandler(() => {}, { pool });
export const response: Promise<SQSBatchResponse> = createInboxHandler(() => {}, { pool })(sqsEvent, context);

// The same handler reads a Kinesis event source: a KinesisStreamHandler, given aws-lambda's KinesisStreamEvent.
declare const kinesisEvent: KinesisStreamEvent;
export const streamHandler: KinesisStreamHandler = createInboxHandler(() => {}, { pool });
export const streamResponse = createInboxHandler(() => {}, { pool })(kinesisEvent, context);
export const parsedFromStream: InboxEvent = parseInboxEvent(
  kinesisEvent.Records[0] as KinesisStreamEvent["Records"][0],
);

// Typed payloads: an annotated handler, a typed InboxRecordHandler, typed routes, no casts.
export const typedHandler = createInboxHandler(
  async (e: InboxEvent<Order>, { client }) => {
    await client.query("insert into orders (id, total) values ($1, $2)", [
      e.payload.orderId,
      e.payload.total,
    ]);
  },
  { pool },
);
const recordHandler: InboxRecordHandler<Order> = (e) => {
  const total: number = e.payload.total;
  void total;
};
export const fromRecordHandler = createInboxHandler(recordHandler, { pool });

interface Paid {
  orderId: string;
  paidAt: string;
}
export const routed = createInboxHandler(
  {
    "order.placed": (e: InboxEvent<Order>) => {
      const total: number = e.payload.total;
      void total;
    },
    "order.paid": async (e: InboxEvent<Paid>) => {
      const paidAt: string = e.payload.paidAt;
      void paidAt;
    },
  },
  { pool },
);
const routes: InboxRoutes<{ "order.placed": Order }> = { "order.placed": recordHandler };
export const fromRoutes = createInboxHandler(routes, { pool });

// parse: a Standard Schema (zod, valibot, arktype implement `~standard`) types the handler's payload.
declare const orderSchema: StandardSchemaV1<unknown, Order>;
export const parsedBySchema = createInboxHandler(
  (e) => {
    const total: number = e.payload.total;
    void total;
  },
  { pool, parse: orderSchema },
);
// ... or a plain function.
export const parsedByFunction = createInboxHandler(
  (e) => {
    const id: string = e.payload.orderId;
    void id;
  },
  // (annotate the parameter: TypeScript types the handler before an unannotated function argument after it)
  { pool, parse: (payload: unknown): Order => payload as Order },
);
// A route with its own parse (inboxRoute infers the handler's payload from it).
export const routedWithParse = createInboxHandler(
  {
    "order.placed": inboxRoute({
      parse: orderSchema,
      handle: (e) => {
        const total: number = e.payload.total;
        void total;
      },
    }),
    "order.paid": { parse: (payload): Paid => payload as Paid, handle: (e: InboxEvent<Paid>) => void e },
  },
  { pool },
);

// Mistakes the types catch.
createInboxHandler(
  (e: InboxEvent<Order>) => {
    // @ts-expect-error Order has no `customer`.
    void e.payload.customer;
  },
  { pool },
);
// @ts-expect-error the handler's payload type must match what parse returns.
createInboxHandler((e: InboxEvent<Paid>) => void e, { pool, parse: orderSchema });
// @ts-expect-error staleEvents is "apply" or "skip".
createInboxHandler(() => {}, { pool, staleEvents: "drop" });
