import { randomBytes } from "node:crypto";
import type { OutboxEvent } from "../../functions/shared/produce/enqueue.ts";

let counter = 0;

export function anEvent(overrides: Partial<OutboxEvent<unknown>> = {}): OutboxEvent<unknown> {
  counter += 1;
  return {
    aggregateType: "order",
    aggregateId: `order-${randomBytes(3).toString("hex")}`,
    eventType: "order.created",
    payload: { n: counter, total: 4200, currency: "EUR" },
    ...overrides,
  };
}
