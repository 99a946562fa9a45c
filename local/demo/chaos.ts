/**
 * The faults of `npm start --chaos`, one cycle spread over the run (repeating every 45 s when the run has no
 * --duration):
 *  1. at 20%: the SQS endpoint answers 503 to everything for a few seconds; publishes fail as a whole, rows
 *     back off (never dead-letter: it is an outage, not a bad message) and go out when it is back;
 *  2. as SQS comes back: the relay is SIGKILLed right after SQS accepted one of its batches and before it
 *     recorded it (the fault proxy withholds SQS's answer and kills the process in between). Armed at the end
 *     of the outage because the first batches then are full ones from the backlog (at the demo's steady rate a
 *     batch holds one or two events). It is restarted a second later, claims the same rows again and
 *     republishes them with the same deduplication ids. Real SQS drops such copies within its 5-minute window;
 *     moto only compares with messages still in the queue, so once the consumer deleted the first copy the
 *     second one is delivered, and the inbox has to catch it;
 *  3. at 60%: the consumer "crashes" after processing a batch and before deleting it; SQS delivers those
 *     messages again and the inbox recognises them.
 * All done well before the run ends, so the summary also shows the recovery.
 */
import type { FaultProxy } from "../fakes/faultProxy.ts";
import type { InboxConsumer } from "./consumer.ts";
import type { RelayProcess } from "./relayProcess.ts";

export interface ChaosReport {
  relayKills: number;
  /** Outbox ids of the messages SQS accepted from a relay that was killed before recording them. */
  unrecordedAccepted: string[];
  outageSeconds: number;
  consumerCrashes: number;
  /** Outbox ids of the messages a crashed consumer had processed and that were delivered again. */
  redelivered: string[];
}

interface ChaosDeps {
  proxy: FaultProxy;
  relay: RelayProcess;
  consumer: InboxConsumer;
  event(text: string): void;
}

const CYCLE_WITHOUT_DURATION_SECONDS = 45;

export class Chaos {
  readonly report: ChaosReport = {
    relayKills: 0,
    unrecordedAccepted: [],
    outageSeconds: 0,
    consumerCrashes: 0,
    redelivered: [],
  };
  readonly #deps: ChaosDeps;
  readonly #timers: NodeJS.Timeout[] = [];
  #stopped = false;

  constructor(deps: ChaosDeps) {
    this.#deps = deps;
  }

  /** Schedules one cycle over `durationSeconds`, or repeating cycles when the run is open-ended. */
  start(durationSeconds: number | null): void {
    const cycle = durationSeconds ?? CYCLE_WITHOUT_DURATION_SECONDS;
    // 3-5 s: long enough to fail many rounds; short enough that moto, whose per-message cost grows with the
    // queue's depth, can work off the backlog afterwards.
    const outageSeconds = Math.min(5, Math.max(3, Math.round(cycle * 0.1)));
    const at = (fraction: number, action: () => void) =>
      this.#timers.push(setTimeout(action, fraction * cycle * 1000));
    at(0.2, () => this.#outage(outageSeconds));
    at(0.6, () => void this.#crashConsumer());
    if (durationSeconds === null) this.#timers.push(setTimeout(() => this.start(null), cycle * 1000));
  }

  /**
   * No new faults; an outage in progress ends now, so the drain is not held up by the demo's own fault. A consumer
   * crash already asked for stays armed: on a slow machine its next batch may come only while the run catches up,
   * and the crash (its redelivery) is part of what the run must show.
   */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#deps.proxy.disarm();
    this.#deps.proxy.failFor(0);
  }

  async #killRelayAfterAcceptedBatch() {
    const { proxy, relay, event } = this.#deps;
    event("chaos: the relay will be killed right after SQS accepts its next batch");
    const batch = await proxy.trapNextAcceptedBatch(() => relay.kill());
    if (this.#stopped) return;
    this.report.relayKills++;
    this.report.unrecordedAccepted.push(...batch.acceptedIds);
    event(
      `chaos: relay SIGKILLed after SQS accepted ${batch.acceptedIds.length} message(s) it never recorded; ` +
        "they are still pending and will be sent again with the same deduplication ids",
    );
  }

  #outage(seconds: number) {
    if (this.#stopped) return;
    this.report.outageSeconds += seconds;
    this.#deps.proxy.failFor(seconds * 1000);
    this.#deps.event(`chaos: SQS endpoint down (503 to every request) for ${seconds} s`);
    this.#timers.push(
      setTimeout(() => {
        if (this.#stopped) return;
        this.#deps.event("chaos: SQS endpoint back");
        void this.#killRelayAfterAcceptedBatch();
      }, seconds * 1000),
    );
  }

  async #crashConsumer() {
    const { consumer, event } = this.#deps;
    event("chaos: the consumer will crash after processing its next batch, before deleting it");
    const outboxIds = await consumer.crashAfterNextBatch();
    this.report.consumerCrashes++;
    this.report.redelivered.push(...outboxIds);
    event(`chaos: consumer crashed after processing ${outboxIds.length} message(s); SQS delivers them again`);
  }
}
