/**
 * Calls the user's handler as Lambda does: the event, a context, a callback; an async handler's promise or the
 * callback's result is the response. A handler that throws (or calls back with an error) fails the whole batch,
 * as a failed invocation does: every record of it is delivered again.
 */
import { randomUUID } from "node:crypto";
import type { SqsBatchResponse } from "../../functions/shared/consumer/index.ts";
import type { LambdaFunction } from "./consumerModule.ts";

/** Lambda's default function timeout, which the context's getRemainingTimeInMillis counts down from. */
const TIMEOUT_MS = 30_000;

export interface Invocation {
  response: SqsBatchResponse;
  /** The handler threw or called back with an error: every record failed. */
  error?: unknown;
}

export async function invokeLambda(
  handler: LambdaFunction,
  event: unknown,
  allRecordIds: readonly string[],
): Promise<Invocation> {
  const deadline = Date.now() + TIMEOUT_MS;
  const context = {
    functionName: "outbox-dev-consumer",
    functionVersion: "$LATEST",
    awsRequestId: randomUUID(),
    memoryLimitInMB: "128",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  try {
    const result = await new Promise<unknown>((resolve, reject) => {
      const returned = handler(event, context, (error, value) => (error ? reject(error) : resolve(value)));
      if (returned !== undefined && typeof (returned as Promise<unknown>).then === "function") {
        (returned as Promise<unknown>).then(resolve, reject);
      } else if (handler.length < 3) {
        resolve(returned); // a synchronous handler that takes no callback has answered
      }
    });
    return { response: batchResponse(result) };
  } catch (error) {
    return {
      response: { batchItemFailures: allRecordIds.map((itemIdentifier) => ({ itemIdentifier })) },
      error,
    };
  }
}

/** No response (or none with batchItemFailures) means every record succeeded, as for Lambda's event sources. */
function batchResponse(result: unknown): SqsBatchResponse {
  const failures = (result as { batchItemFailures?: unknown } | null | undefined)?.batchItemFailures;
  if (!Array.isArray(failures)) return { batchItemFailures: [] };
  return { batchItemFailures: failures as SqsBatchResponse["batchItemFailures"] };
}
