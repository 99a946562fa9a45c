import type {
  SendMessageBatchCommand,
  SendMessageBatchCommandInput,
  SendMessageBatchCommandOutput,
} from "@aws-sdk/client-sqs";
// Types only (erased): the SDK's own middleware types, from the package its clients' declarations import them from.
import type { SerializeMiddleware } from "@smithy/types";
import { sqsSdk } from "./sdk.ts";
import type { SqsMessage } from "./sqsMessage.ts";

type Middleware = SerializeMiddleware<SendMessageBatchCommandInput, SendMessageBatchCommandOutput>;

/**
 * SendMessageBatch with its JSON body written by JSON.stringify instead of the SDK's serializer; everything else is
 * the SDK's, unchanged: the client's middleware (endpoint, the queue URL's host, signing, retries, user agent,
 * content length, the MD5 check when the client has it on, which reads the command's own input) and its HTTP
 * handler. The SDK (3.1175) writes JSON by walking the operation's schema member by member into a byte buffer:
 * 14 % of the relay thread's CPU in a profile of the default relay (docs/benchmarks.md), where the native
 * JSON.stringify of the same entries is a third of that.
 *
 * Same bytes on the wire as far as JSON goes: awsJson1_0 names members as the model does (no jsonName), and every
 * value of an entry is a string (SqsMessage: body, ids, String/Number attributes as StringValue), which
 * JSON.stringify escapes as JSON requires; nothing is undefined, null, binary or a date, the values the SDK would
 * write differently. test/destinations/sqsBatchBody.test.ts compares the two bodies.
 *
 * How: a middleware just before the SDK's serializer hands it the input without its entries (the serializer writes
 * `{"QueueUrl":…,"Entries":[]}`, and nothing after it reads the entries), and one just after it puts the whole
 * body in the request it built. Both are the command's own (Command.middlewareStack), named, relative to the
 * SDK's `serializerMiddleware`: if a later SDK renamed that step, adding them would throw at the first send,
 * not send a wrong body.
 */
export async function sendMessageBatchCommand(
  queueUrl: string,
  entries: readonly (SqsMessage & { Id: string })[],
): Promise<SendMessageBatchCommand> {
  const { SendMessageBatchCommand } = await sqsSdk();
  const input = { QueueUrl: queueUrl, Entries: [...entries] };
  const body = JSON.stringify(input);
  const command = new SendMessageBatchCommand(input);
  const withoutEntries: Middleware = (next) => (args) =>
    next({ ...args, input: { QueueUrl: queueUrl, Entries: [] } });
  const wholeBody: Middleware = (next) => (args) => {
    (args.request as { body?: unknown }).body = body;
    return next(args);
  };
  command.middlewareStack.addRelativeTo(withoutEntries, {
    relation: "before",
    toMiddleware: "serializerMiddleware",
    name: "outboxBatchEntriesAside",
  });
  command.middlewareStack.addRelativeTo(wholeBody, {
    relation: "after",
    toMiddleware: "serializerMiddleware",
    name: "outboxBatchBody",
  });
  return command;
}
