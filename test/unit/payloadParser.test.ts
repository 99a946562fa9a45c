import { describe, expect, it } from "vitest";
import type { InboxEvent, StandardSchemaV1 } from "../../functions/shared/consumer/index.ts";
import { isPayloadParser, parsePayload } from "../../functions/shared/consumer/payloadParser.ts";
import { ValidationError } from "../../functions/shared/outbox/errors.ts";
import { inboxEvent } from "./records.ts";

interface Order {
  orderId: string;
  total: number;
}

/** A Standard Schema as zod, valibot or arktype expose one, written by hand; `async` validates in a promise. */
function orderSchema(options: { async?: boolean } = {}): StandardSchemaV1<unknown, Order> {
  const validate = (value: unknown): StandardSchemaV1.Result<Order> => {
    const v = value as Partial<Order> | null;
    const issues: StandardSchemaV1.Issue[] = [];
    if (typeof v?.orderId !== "string") issues.push({ message: "expected a string", path: ["orderId"] });
    if (typeof v?.total !== "number") issues.push({ message: "expected a number", path: [{ key: "total" }] });
    if (issues.length > 0) return { issues };
    return { value: { orderId: v?.orderId as string, total: v?.total as number } };
  };
  return {
    "~standard": {
      version: 1,
      vendor: "handwritten",
      validate: options.async === true ? async (value) => validate(value) : validate,
    },
  };
}

async function refusal(promise: Promise<unknown>): Promise<ValidationError> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof ValidationError))
    throw new Error(`expected a ValidationError, got ${String(error)}`);
  return error;
}

describe("parsePayload with a Standard Schema", () => {
  it("gives the handler the schema's output (extra fields dropped), the rest of the event unchanged", async () => {
    const event = inboxEvent({ payload: { orderId: "o-1", total: 5, extra: true } });
    for (const schema of [orderSchema(), orderSchema({ async: true })]) {
      const parsed = await parsePayload(schema, event);
      expect(parsed).toEqual({ ...event, payload: { orderId: "o-1", total: 5 } });
    }
    expect(event.payload).toEqual({ orderId: "o-1", total: 5, extra: true });
  });

  it("refuses a payload with a ValidationError of field payload listing each issue with its path", async () => {
    const error = await refusal(parsePayload(orderSchema(), inboxEvent({ payload: { total: "5" } })));
    expect(error.field).toBe("payload");
    expect(error.message).toBe(
      "payload: does not match the handwritten schema: orderId: expected a string; total: expected a number",
    );
  });

  it("words an issue without a path (or with an empty one) as its message alone", async () => {
    const schema = (issues: StandardSchemaV1.Issue[]): StandardSchemaV1<unknown, unknown> => ({
      "~standard": { version: 1, vendor: "v", validate: () => ({ issues }) },
    });
    const noPath = await refusal(parsePayload(schema([{ message: "not an order" }]), inboxEvent()));
    expect(noPath.message).toBe("payload: does not match the v schema: not an order");
    const emptyPath = await refusal(
      parsePayload(
        schema([
          { message: "empty", path: [] },
          { message: "deep", path: ["a", 0, { key: "b" }] },
        ]),
        inboxEvent(),
      ),
    );
    expect(emptyPath.message).toBe("payload: does not match the v schema: empty; a.0.b: deep");
  });
});

describe("parsePayload with a function", () => {
  it("hands it the payload and the event, and gives the handler what it returns (awaited)", async () => {
    const seen: [unknown, InboxEvent][] = [];
    const event = inboxEvent({ payload: "5" });
    const parsed = await parsePayload(async (payload, given) => {
      seen.push([payload, given]);
      return Number(payload) * 2;
    }, event);
    expect(parsed.payload).toBe(10);
    expect(parsed.id).toBe(event.id);
    expect(seen).toEqual([["5", event]]);
  });

  it("turns its throw into a ValidationError of field payload, the thrown error as the cause", async () => {
    const thrown = new Error("total must be positive");
    const error = await refusal(
      parsePayload(() => {
        throw thrown;
      }, inboxEvent()),
    );
    expect(error.field).toBe("payload");
    expect(error.message).toBe("payload: was refused by the parse hook: total must be positive");
    expect(error.cause).toBe(thrown);
  });

  it("treats a rejected promise like a throw", async () => {
    const error = await refusal(parsePayload(() => Promise.reject(new Error("later")), inboxEvent()));
    expect(error.message).toBe("payload: was refused by the parse hook: later");
  });
});

describe("isPayloadParser", () => {
  it("accepts a function or an object with ~standard.validate, and nothing else", () => {
    expect(isPayloadParser(() => 1)).toBe(true);
    expect(isPayloadParser(orderSchema())).toBe(true);
    for (const value of [
      undefined,
      null,
      "zod",
      3,
      {},
      { "~standard": {} },
      { "~standard": { validate: 1 } },
    ]) {
      expect(isPayloadParser(value)).toBe(false);
    }
  });
});
