import { describe, expect, it } from "vitest";
import {
  type InboxEvent,
  type InboxHandlerContext,
  type InboxRecordHandler,
  inboxRoute,
  type StandardSchemaV1,
  UnroutedEventError,
} from "../../functions/shared/consumer/index.ts";
import { eventRouter } from "../../functions/shared/consumer/router.ts";
import { ConfigError, ValidationError } from "../../functions/shared/outbox/errors.ts";
import { inboxEvent, sqsRecord } from "./records.ts";

const context: InboxHandlerContext = {
  client: { query: () => Promise.reject(new Error("a unit test has no database")) } as never,
  record: sqsRecord("m-1"),
  lambdaContext: undefined,
};

/** A handler that notes which route ran and with what payload. */
function noting(name: string, seen: [string, unknown][]): InboxRecordHandler<unknown> {
  return (event) => {
    seen.push([name, event.payload]);
  };
}

async function runRouted(route: InboxRecordHandler<unknown> | undefined, event: InboxEvent): Promise<void> {
  if (route === undefined) throw new Error("expected a route");
  await route(event, context);
}

describe("eventRouter: event type -> handler", () => {
  it("sends every event type to the one handler", async () => {
    const seen: [string, unknown][] = [];
    const route = eventRouter(noting("only", seen), "fail", undefined);
    await runRouted(route(inboxEvent({ eventType: "order.placed" })), inboxEvent({ payload: 1 }));
    await runRouted(route(inboxEvent({ eventType: "anything.else" })), inboxEvent({ payload: 2 }));
    expect(seen).toEqual([
      ["only", 1],
      ["only", 2],
    ]);
  });

  it("picks the route of the event's type, and no other", async () => {
    const seen: [string, unknown][] = [];
    const route = eventRouter(
      { "order.placed": noting("placed", seen), "order.paid": noting("paid", seen) },
      "fail",
      undefined,
    );
    const paid = inboxEvent({ eventType: "order.paid", payload: "p" });
    await runRouted(route(paid), paid);
    expect(seen).toEqual([["paid", "p"]]);
  });

  it('fails an unrouted event type with UnroutedEventError naming it and the routes (unknownEventTypes "fail")', () => {
    const route = eventRouter({ "order.placed": () => {}, "order.paid": () => {} }, "fail", undefined);
    const unrouted = () => route(inboxEvent({ eventType: "order.shipped" }));
    expect(unrouted).toThrow(UnroutedEventError);
    expect(unrouted).toThrow(
      'no handler for event type "order.shipped" (routes: order.placed, order.paid); ' +
        'add one, or pass unknownEventTypes: "ignore"',
    );
  });

  it('answers undefined for an unrouted event type with unknownEventTypes "ignore"', () => {
    const route = eventRouter({ "order.placed": () => {} }, "ignore", undefined);
    expect(route(inboxEvent({ eventType: "order.shipped" }))).toBeUndefined();
    expect(route(inboxEvent({ eventType: "order.placed" }))).toBeTypeOf("function");
  });

  it("does not take an inherited property for a route", () => {
    const route = eventRouter({ "order.placed": () => {} }, "fail", undefined);
    expect(() => route(inboxEvent({ eventType: "toString" }))).toThrow(UnroutedEventError);
  });

  it("refuses, at creation, a route that is neither a function nor { parse, handle }", () => {
    for (const bad of ["not a function", null, { handle: () => {} }, { parse: 3, handle: () => {} }]) {
      expect(() => eventRouter({ "order.placed": bad } as never, "fail", undefined)).toThrow(ConfigError);
    }
    expect(() => eventRouter({ "order.placed": { parse: () => 1 } } as never, "fail", undefined)).toThrow(
      'createInboxHandler: the route for "order.placed" is not a function or { parse, handle }',
    );
  });

  it("runs the options' parse hook before the one handler, which sees the parsed payload", async () => {
    const seen: [string, unknown][] = [];
    const route = eventRouter(noting("only", seen), "fail", (payload) => ({ wrapped: payload }));
    const event = inboxEvent({ payload: 7 });
    await runRouted(route(event), event);
    expect(seen).toEqual([["only", { wrapped: 7 }]]);
  });

  it("runs a route's own parse hook, and a refused payload never reaches its handler", async () => {
    const seen: [string, unknown][] = [];
    // Untyped, as the router holds routes: their payload types are test/consumer/types.ts's subject.
    const total: StandardSchemaV1<unknown, unknown> = {
      "~standard": {
        version: 1,
        vendor: "handwritten",
        validate: (value) =>
          typeof value === "number" ? { value: value * 100 } : { issues: [{ message: "expected a number" }] },
      },
    };
    const route = eventRouter(
      {
        "order.paid": inboxRoute({
          parse: total,
          handle: (event) => void seen.push(["paid", event.payload]),
        }),
      },
      "fail",
      undefined,
    );
    const good = inboxEvent({ eventType: "order.paid", payload: 3 });
    await runRouted(route(good), good);
    const bad = inboxEvent({ eventType: "order.paid", payload: "3" });
    await expect(runRouted(route(bad), bad)).rejects.toThrow(ValidationError);
    expect(seen).toEqual([["paid", 300]]);
  });

  it("hands the handler the context it was called with", async () => {
    const contexts: InboxHandlerContext[] = [];
    const route = eventRouter(
      (_event, given) => {
        contexts.push(given);
      },
      "fail",
      () => "parsed",
    );
    const event = inboxEvent();
    await runRouted(route(event), event);
    expect(contexts).toEqual([context]);
    expect(contexts[0]).toBe(context);
  });
});
