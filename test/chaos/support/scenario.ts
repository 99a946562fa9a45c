import { CreateEventBusCommand, EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import type { Delivery, FakeSqs } from "../../../cli/dev/aws/fakeSqs.ts";
import { RELAY_SETTINGS } from "../../../functions/shared/relay/settings.ts";
import { LOCAL_AWS } from "../../../local/backends/awsEndpoint.ts";
import { eventsAsDeliveries } from "../../support/eventBridge.ts";
import { checkLedger, type LedgerReport } from "../../support/ledger.ts";
import { PRIVATE } from "../../support/privateSchema.ts";
import { TEST_RETENTION } from "../../support/relay.ts";
import { type ProducerLoad, Producers } from "./producers.ts";
import { chaosLoad } from "./profile.ts";
import { type FleetStats, RelayFleet } from "./relayProcess.ts";
import { waitFor } from "./waitFor.ts";

/** A stretch of time during which a fault was in effect; duplicates must fall across one to be explained. */
export interface FaultWindow {
  what: string;
  start: number;
  end: number;
}

export interface ChaosContext {
  fake: FakeSqs;
  fleet: RelayFleet;
  producers: Producers;
  load: ProducerLoad;
  /** Events committed so far. */
  written(): number;
  /** Distinct events the endpoint has accepted so far. */
  delivered(): number;
  /** Marks the start of a fault; call the returned function when it is over. */
  beginFault(what: string): () => void;
  waitFor: typeof waitFor;
}

export interface ChaosScenario {
  name: string;
  relays: number;
  /** Where the relays publish: a FIFO queue (default) or an EventBridge bus, both on the in-process endpoint. */
  destination?: "sqs-fifo" | "eventbridge";
  /** Relay environment overrides (RELAY_*, CHAOS_INVOCATION_MS). */
  relayEnv?: Record<string, string>;
  /** How the producers write (the event count stays the profile's). */
  producers?: Pick<ProducerLoad, "aggregates" | "unserialized" | "maxHoldMs">;
  /** Injects the faults while producers write and relays run; resolves when the last fault is over. */
  chaos(context: ChaosContext): Promise<void>;
}

export interface ChaosReport {
  scenario: string;
  events: number;
  aggregates: number;
  durationMs: number;
  ledger: LedgerReport;
  /** Duplicate deliveries SQS FIFO dropped (same dedup id within 5 minutes): consumers never see them. */
  fifoDeduplicated: number;
  /** Duplicates with no fault window between their first and their repeated delivery. */
  unexplainedDuplicates: string[];
  duplicateCauses: Record<string, number>;
  /**
   * Rows by state at the end (published: marked rows plus those deleted as published); `retried`: rows still in
   * the table that needed more than one try, whether the failure counted as an attempt (the message's fault) or a
   * transient failure (SQS's). With OUTBOX_RETENTION=delete a published row is gone: `relays.failedEntries`
   * counts the failed tries in either mode.
   */
  table: { published: number; pending: number; dead: number; retried: number };
  relays: FleetStats;
  producers: Producers["stats"];
  faults: FaultWindow[];
}

const CHAOS_BATCH_SIZE = 100;
const CHAOS_PARALLEL_ROUNDS = 2;

/**
 * Rows one relay process can have sent but not recorded at any instant: every parallel round's whole batch.
 * A relay killed then re-sends at most this many (deduplicated by SQS on their outbox ids).
 */
export const CHAOS_ROWS_IN_FLIGHT_PER_RELAY = CHAOS_BATCH_SIZE * CHAOS_PARALLEL_ROUNDS;

/** Relay settings for chaos: retries fast (20-500 ms backoff) and never dead-letters a transient failure. */
const CHAOS_RELAY_ENV = {
  RELAY_MODE: "dwell",
  [RELAY_SETTINGS.retention.env]: TEST_RETENTION,
  RELAY_BATCH_SIZE: String(CHAOS_BATCH_SIZE),
  RELAY_PARALLEL_ROUNDS: String(CHAOS_PARALLEL_ROUNDS),
  RELAY_CONCURRENCY: "10",
  RELAY_MAX_ATTEMPTS: "1000",
  RELAY_BACKOFF_BASE_MS: "20",
  RELAY_BACKOFF_MAX_MS: "500",
  RELAY_PUBLISH_TIMEOUT_MS: "3000",
  RELAY_STATEMENT_TIMEOUT_MS: "2000",
  RELAY_IDLE_POLL_MIN_MS: "10",
  RELAY_IDLE_POLL_MAX_MS: "100",
  RELAY_BUDGET_MARGIN_MS: "500",
  CHAOS_INVOCATION_MS: "120000",
};

/** After the producers are done and faults are over, everything must be published within this. */
const SETTLE_TIMEOUT_MS = 90_000;

/**
 * Runs one scenario end to end: a fresh FIFO queue on the in-process endpoint, relay child processes,
 * producers writing through the write API, the scenario's faults, then a bounded wait until the outbox is
 * empty, and the ledger: what was written against what the endpoint accepted.
 */
export async function runChaosScenario(
  databaseUrl: string,
  fake: FakeSqs,
  scenario: ChaosScenario,
): Promise<ChaosReport> {
  const load = { ...chaosLoad(), ...scenario.producers };
  fake.resetFaults();
  fake.up();
  fake.resetStats();
  fake.clearDeliveries();
  fake.events.reset();
  fake.events.clearEvents();
  const toBus = scenario.destination === "eventbridge";
  const name = `chaos-${scenario.name}-${Date.now()}`;
  const destinationEnv: Record<string, string> = toBus
    ? { OUTBOX_EVENT_BUS_NAME: await createBus(fake, name) }
    : { OUTBOX_QUEUE_URL: await createQueue(fake, `${name}.fifo`) };
  // Ledger input: the queue's accepted sends, or the events the bus accepted (outbox id from the detail).
  const deliveriesSoFar = () =>
    toBus ? eventsAsDeliveries(fake.events.events(name)) : fake.deliveries(`${name}.fifo`);
  const fleet = new RelayFleet({
    DATABASE_URL: databaseUrl,
    ...destinationEnv,
    AWS_ENDPOINT_URL: fake.url,
    AWS_REGION: LOCAL_AWS.region,
    AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
    ...CHAOS_RELAY_ENV,
    ...scenario.relayEnv,
  });
  const producers = new Producers(databaseUrl, load);
  const observer = new pg.Pool({ connectionString: databaseUrl, max: 1, connectionTimeoutMillis: 2_000 });
  observer.on("error", () => {});
  const faults: FaultWindow[] = [];
  const started = Date.now();
  try {
    for (let i = 0; i < scenario.relays; i++) await fleet.start();
    producers.start();
    await scenario.chaos({
      fake,
      fleet,
      producers,
      load,
      written: () => producers.written.length,
      delivered: () =>
        toBus ? fake.events.stats.acceptedEvents : fake.stats.acceptedMessages - fake.stats.duplicates,
      beginFault(what) {
        const window = { what, start: Date.now(), end: Number.POSITIVE_INFINITY };
        faults.push(window);
        return () => {
          window.end = Date.now();
        };
      },
      waitFor,
    });
    for (const window of faults) window.end = Math.min(window.end, Date.now());
    fake.resetFaults();
    fake.up();
    await producers.finished();
    await waitFor(
      "every committed event to be published",
      async () => (await tableState(observer).catch(() => undefined))?.pending === 0,
      SETTLE_TIMEOUT_MS,
      async () =>
        `table: ${JSON.stringify(await tableState(observer).catch(String))}; relays: ${JSON.stringify(fleet.stats)}; ${fleet.stderr}`,
    );
    await fleet.stopAll();
    const deliveries = deliveriesSoFar();
    const ledger = checkLedger(producers.written, deliveries);
    const duplicates = explainDuplicates(deliveries, faults);
    return {
      scenario: scenario.name,
      events: producers.written.length,
      aggregates: load.aggregates,
      durationMs: Date.now() - started,
      ledger,
      ...duplicates,
      table: await tableState(observer),
      relays: fleet.stats,
      producers: producers.stats,
      faults,
    };
  } finally {
    await fleet.stopAll();
    await producers.finished().catch(() => {});
    await producers.close();
    await observer.end();
  }
}

async function createBus(fake: FakeSqs, name: string): Promise<string> {
  const events = new EventBridgeClient({ ...LOCAL_AWS, endpoint: fake.url });
  try {
    await events.send(new CreateEventBusCommand({ Name: name }));
    return name;
  } finally {
    events.destroy();
  }
}

async function createQueue(fake: FakeSqs, name: string): Promise<string> {
  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url });
  try {
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({
        QueueName: name,
        Attributes: { FifoQueue: "true", MaximumMessageSize: "1048576" },
      }),
    );
    if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
    return QueueUrl;
  } finally {
    sqs.destroy();
  }
}

async function tableState(pool: pg.Pool) {
  const { rows } = await pool.query<ChaosReport["table"]>(
    `select (count(*) filter (where processed_at is not null)
             + (select events from ${PRIVATE}.outbox_deleted_on_publish))::integer as published,
            count(*) filter (where processed_at is null and dead_lettered_at is null)::integer as pending,
            count(*) filter (where dead_lettered_at is not null)::integer as dead,
            count(*) filter (where attempts + transient_failures > 0)::integer as retried
     from outbox_events`,
  );
  const [state] = rows;
  if (state === undefined) throw new Error("no table state");
  return state;
}

/**
 * Every repeated delivery of an event should be (a) dropped by FIFO deduplication (the fake flags it) and
 * (b) caused by a fault: a fault window lies between the first delivery and the repeat (the relay died, or
 * lost its database, after SQS accepted the message and before the round committed).
 */
function explainDuplicates(deliveries: Delivery[], faults: FaultWindow[]) {
  const first = new Map<string, number>();
  const causes: Record<string, number> = {};
  const unexplained: string[] = [];
  let fifoDeduplicated = 0;
  for (const delivery of deliveries) {
    const id = delivery.dedupId ?? "";
    const firstAt = first.get(id);
    if (firstAt === undefined) {
      first.set(id, delivery.at);
      continue;
    }
    if (delivery.duplicate) fifoDeduplicated++;
    const cause = faults.find((fault) => fault.start <= delivery.at && fault.end >= firstAt);
    if (cause === undefined) unexplained.push(id);
    else causes[cause.what] = (causes[cause.what] ?? 0) + 1;
  }
  return { fifoDeduplicated, unexplainedDuplicates: unexplained, duplicateCauses: causes };
}

/** One line per scenario for the log: what was written, what arrived, what repeated and why. */
export function describeReport(report: ChaosReport): string {
  const { ledger } = report;
  const causes = Object.entries(report.duplicateCauses)
    .map(([what, n]) => `${n} across "${what}"`)
    .join(", ");
  return [
    `[chaos] ${report.scenario}: ${report.events} events over ${report.aggregates} aggregates in ${(report.durationMs / 1000).toFixed(1)} s`,
    `  lost ${ledger.lost.length}, order violations ${ledger.orderViolations.length}, table ${JSON.stringify(report.table)}`,
    `  duplicates ${ledger.duplicates} (FIFO-deduplicated ${report.fifoDeduplicated}${causes ? `; ${causes}` : ""}; unexplained ${report.unexplainedDuplicates.length})`,
    `  relays: started ${report.relays.started}, killed ${report.relays.killed}, rounds ${report.relays.rounds}, failed rounds ${report.relays.failedRounds}, invocations ${JSON.stringify(report.relays.invocationsByStop)}, hard timeouts ${report.relays.hardTimeouts}`,
    ...(report.relays.lastErrors.length > 0
      ? [`  last round errors: ${report.relays.lastErrors.join(" | ")}`]
      : []),
    `  producers: ${JSON.stringify(report.producers)}; faults: ${report.faults.map((f) => `${f.what} (${f.end - f.start} ms)`).join(", ") || "none"}`,
  ].join("\n");
}
