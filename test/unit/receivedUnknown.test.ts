import { describe, expect, it } from "vitest";
import type { LoadedRow } from "../../functions/shared/destinations/destination.ts";
import {
  type Prepared,
  type PublishResult,
  requestFailed,
} from "../../functions/shared/destinations/destination.ts";

/**
 * Issue 39: relay logs said failure="unsent" for aborted requests whose messages had reached the queue (40
 * labelled unsent, 400 of 400 present). "unsent" means the destination said it did not take them; a request
 * that got no answer, or a 5xx one, is "uncertain": its retry may be a duplicate.
 */
const entry = { row: { id: "e1" } as LoadedRow, message: {}, size: 1 } as Prepared<unknown>;
const statusOf = async (error: unknown): Promise<PublishResult["status"] | undefined> =>
  (await requestFailed([entry], error, false, async () => []))[0]?.status;

/** What the AWS SDK v3 throws: a service error carries the HTTP answer in `$metadata`. */
function serviceError(name: string, httpStatusCode: number): Error {
  return Object.assign(new Error(name), {
    name,
    $fault: httpStatusCode >= 500 ? "server" : "client",
    $metadata: { httpStatusCode },
  });
}

describe("a failed request's entries: unsent only when the destination said no", () => {
  it("is uncertain when the request got no answer: aborted at the round's deadline, timed out, reset", async () => {
    const aborted = Object.assign(new Error("Request aborted"), { name: "AbortError", $metadata: {} });
    const timedOut = Object.assign(new Error("socket timed out"), { name: "TimeoutError" });
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });

    expect(await statusOf(aborted)).toBe("uncertain");
    expect(await statusOf(timedOut)).toBe("uncertain");
    expect(await statusOf(reset)).toBe("uncertain");
  });

  it("is uncertain after a 5xx (the service may have stored it) and unsent after a 4xx answer", async () => {
    expect(await statusOf(serviceError("InternalError", 500))).toBe("uncertain");
    expect(await statusOf(serviceError("ServiceUnavailable", 503))).toBe("uncertain");
    expect(await statusOf(serviceError("ThrottlingException", 400))).toBe("unsent");
    expect(await statusOf(serviceError("AccessDeniedException", 403))).toBe("unsent");
  });
});
