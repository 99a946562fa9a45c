import { describe, expect, it } from "vitest";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import type { RelaySummary } from "../../functions/shared/relay/engine.ts";
import { noProgressError } from "../../functions/shared/relay/invocation.ts";
import { hasPendingEvents } from "../../functions/shared/relay/sql/pendingEvents.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { openSession } from "../support/sessions.ts";

/**
 * Issue 21, finding 1 (no quiet stall): one round's statement timed out while its backend kept the claim's row
 * locks, the other loops claimed nothing, and `rounds: 619, claimed: 0, failedRounds: 3` passed as success.
 */
const db = useTestDatabase();
const names = outboxNames({});

const stalled: RelaySummary = {
  claimed: 0,
  published: 0,
  failed: 0,
  deadLettered: 0,
  rounds: 619,
  failedRounds: 3,
  durationMs: 840_000,
  stoppedBy: "deadline",
  lastError: "the database did not answer in time",
};

describe("an invocation with failed rounds that published nothing", () => {
  it("fails while an event is pending, even one locked by a stuck statement", async () => {
    await db.pool.query("delete from outbox_events");
    const [event] = await enqueueCommitted(db.pool, [anEvent()]);
    // The stuck backend: it holds the claimed row's lock, so every other claim skips it.
    const stuck = await openSession(db.url);
    await stuck.client.query("begin");
    await stuck.client.query("select 1 from outbox_events where id = $1 for update", [event?.id]);

    const pending = await hasPendingEvents(db.pool, names);
    await stuck.client.query("rollback");
    await stuck.client.end();

    expect(pending).toBe(true);
    const error = noProgressError(stalled, pending);
    expect(error?.name).toBe("NoProgressError");
    expect(error?.message).toMatch(
      /3 round\(s\) failed and the other 619 published nothing while events were pending/,
    );
  });

  it("does not fail when nothing was pending (a failed round of an idle outbox is only a FailedRounds count)", async () => {
    await db.pool.query("delete from outbox_events");
    const pending = await hasPendingEvents(db.pool, names);
    expect(pending).toBe(false);
    expect(noProgressError(stalled, pending)).toBeUndefined();
    // Unknown (the question itself failed): a failed round counts.
    expect(noProgressError(stalled, undefined)?.name).toBe("NoProgressError");
  });
});

describe("an invocation whose rounds and publishes both failed", () => {
  it("names the publish error too, so a timed-out round does not hide a disabled KMS key", () => {
    const both: RelaySummary = {
      ...stalled,
      claimed: 2,
      failed: 2,
      lastError: "error: canceling statement due to statement timeout",
      lastPublishError: "KmsDisabled: key disabled",
    };

    const error = noProgressError(both, true);

    expect(error?.message).toMatch(/3 round\(s\) failed .*statement timeout/);
    expect(error?.message).toMatch(
      /2 publish attempt\(s\) failed and no event was published; last publish error: KmsDisabled/,
    );
  });
});
