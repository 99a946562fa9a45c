import { ValidationError } from "../outbox/errors.ts";
import type { InboxEvent } from "./inboxEvent.ts";

/**
 * The Standard Schema interface (https://standardschema.dev, v1), written out here so that zod, valibot,
 * arktype and the others that implement `~standard` fit without the package depending on any of them (or on
 * the spec's own package: the interface is meant to be copied).
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (
      value: unknown,
    ) => StandardSchemaV1.Result<Output> | Promise<StandardSchemaV1.Result<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

export declare namespace StandardSchemaV1 {
  type Result<Output> =
    | { readonly value: Output; readonly issues?: undefined }
    | { readonly issues: ReadonlyArray<Issue> };
  interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
  }
}

/**
 * Validates (and may transform) an event's payload before the handler sees it: a Standard Schema, or a
 * function that returns the payload or throws. A payload that fails is a permanent fault of its record.
 */
export type PayloadParser<Payload> =
  // biome-ignore lint/suspicious/noExplicitAny: a schema's input type is whatever it declares; only its output matters here.
  StandardSchemaV1<any, Payload> | ((payload: unknown, event: InboxEvent) => Payload | Promise<Payload>);

export async function parsePayload<Payload>(
  parser: PayloadParser<Payload>,
  event: InboxEvent,
): Promise<InboxEvent<Payload>> {
  if (typeof parser === "function") {
    try {
      return { ...event, payload: await parser(event.payload, event) };
    } catch (error) {
      throw new ValidationError("payload", `was refused by the parse hook: ${(error as Error)?.message}`, {
        cause: error,
      });
    }
  }
  const result = await parser["~standard"].validate(event.payload);
  if (result.issues !== undefined) {
    const issues = result.issues.map((issue) => {
      const path = (issue.path ?? [])
        .map((part) => String(typeof part === "object" ? part.key : part))
        .join(".");
      return path === "" ? issue.message : `${path}: ${issue.message}`;
    });
    throw new ValidationError(
      "payload",
      `does not match the ${parser["~standard"].vendor} schema: ${issues.join("; ")}`,
    );
  }
  return { ...event, payload: result.value };
}

export function isPayloadParser(value: unknown): value is PayloadParser<unknown> {
  return (
    typeof value === "function" ||
    (typeof value === "object" &&
      value !== null &&
      typeof (value as Partial<StandardSchemaV1>)["~standard"]?.validate === "function")
  );
}
