import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { quoteRole } from "./roles.ts";

/** The default outbox's private schema (migration 0016), quoted: where its limits, marks and definer code live. */
export const PRIVATE = quoteRole(outboxNames().privateSchema);
