/**
 * One `npm start` run: backends up, then the three parts of the pipeline side by side (the orders service writing
 * through the outbox, the relay process publishing, the consumer receiving), a live view, and at the end a clean
 * drain and a reconciliation of every event written against the consumer's inbox.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import { KinesisEventSource } from "../../cli/dev/aws/kinesisEventSource.ts";
import { keepsOrder, kinesisClient } from "../../cli/dev/destinations.ts";
import { LOCAL_INVOCATION_SECONDS, LOCAL_RELAY_ENV } from "../../cli/dev/localRelay.ts";
import { readOutboxFigures } from "../../cli/dev/outboxFigures.ts";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { errorMessage } from "../../functions/shared/outbox/errors.ts";
import { type OutboxNames, outboxNames } from "../../functions/shared/outbox/names.ts";
import { type FaultProxy, startFaultProxy } from "../fakes/faultProxy.ts";
import { type DemoBackends, type DemoDestination, startBackends } from "./backends.ts";
import { Chaos, type ChaosReport } from "./chaos.ts";
import { type ConsumerFeed, createInboxSchema, InboxConsumer } from "./consumer.ts";
import { Dashboard, type LiveFigures } from "./dashboard.ts";
import { percentile, reconcile } from "./figures.ts";
import { createOrdersSchema, OrdersService, runProducer } from "./orders.ts";
import { RelayProcess } from "./relayProcess.ts";
import { type DemoResult, printSummary } from "./summary.ts";

export interface DemoOptions {
  /** Seconds; null runs until Ctrl-C. */
  durationSeconds: number | null;
  chaos: boolean;
  ratePerSecond: number;
  openOrders: number;
  /** Where the relay publishes (cli/dev/destinations.ts): SQS FIFO by default. */
  destination: DemoDestination;
}

/** How long the end of a run may take: the relay publishing what is left, then the consumer catching up. */
const DRAIN_TIMEOUT_MS = 60_000;
const CATCH_UP_TIMEOUT_MS = 60_000;
/** Window of the live rates and lag percentiles. */
const LIVE_WINDOW_SECONDS = 5;

export class DemoRun {
  readonly #options: DemoOptions;
  readonly #say: (line: string) => void;
  readonly #stop = new AbortController();
  readonly #teardown: (() => Promise<void>)[] = [];
  #backends!: DemoBackends;
  #pool!: pg.Pool;
  #names!: OutboxNames;
  #sqs!: SQSClient;
  #proxy: FaultProxy | undefined;
  #relay!: RelayProcess;
  #consumer!: InboxConsumer;
  #chaos: Chaos | undefined;
  #dashboard!: Dashboard;
  #since!: Date;
  #startedAt = 0;
  #phase = "running";
  #liveStopped = false;
  readonly #written: string[] = [];
  #writeErrors = 0;
  #consumerErrors = 0;
  #lastConsumerError = "";
  #relayWarnings = 0;
  #relayLastProblem = "";
  #relayLogFile = "";

  constructor(options: DemoOptions, say: (line: string) => void) {
    this.#options = options;
    this.#say = say;
  }

  /** Ctrl-C or --duration: stop producing and wind down cleanly. */
  requestStop(): void {
    this.#stop.abort();
  }

  /** Second Ctrl-C: nothing may outlive the demo, even unfinished. */
  forceStop(): void {
    this.#relay?.killNow();
  }

  async setUp(): Promise<void> {
    const env = process.env;
    this.#backends = await startBackends(env, this.#say, this.#options.destination);
    this.#teardown.push(() => this.#backends.stop());
    this.#names = outboxNames({
      schema: env.OUTBOX_SCHEMA || undefined,
      table: env.OUTBOX_TABLE || undefined,
    });
    this.#pool = new pg.Pool({ connectionString: this.#backends.databaseUrl, max: 12 });
    // A lost connection (the server shutting down at the very end) surfaces as a failed query; unheard 'error'
    // events from idle or checked-out clients would crash the process instead.
    this.#pool.on("error", () => {});
    this.#pool.on("connect", (client) => client.on("error", () => {}));
    this.#teardown.push(() => this.#pool.end());

    const migrated = await migrate(this.#pool, { schema: this.#names.schema, table: this.#names.table });
    await createOrdersSchema(this.#pool);
    await createInboxSchema(this.#pool);
    const { target } = this.#backends;
    // The endpoint labelled by the service the relay publishes to (`sqs` for both queue kinds).
    const service = this.#options.destination.replace("-fifo", "");
    this.#say(
      `postgres: ${this.#backends.postgresSource}  ${service}: ${this.#backends.sqsSource}  ${target.resources}` +
        `  (${migrated.applied.length} migration(s) applied)`,
    );

    if (this.#options.chaos && "queueUrl" in target.consumerSource) {
      const endpoint = this.#backends.sqsEndpoint ?? new URL(target.consumerSource.queueUrl).origin;
      this.#proxy = await startFaultProxy(endpoint);
      const proxy = this.#proxy;
      this.#teardown.push(() => proxy.close());
    }
    this.#sqs = this.#backends.sqsClient();
    this.#teardown.push(async () => this.#sqs.destroy());
    const workDir = await mkdtemp(join(tmpdir(), "outbox-demo-"));
    this.#relayLogFile = join(workDir, "relay.log");
    this.#relay = this.#createRelay();
    this.#teardown.push(() => this.#relay.stop());
    this.#consumer = new InboxConsumer(this.#consumerFeed(), this.#pool);
  }

  #consumerFeed(): ConsumerFeed {
    const source = this.#backends.target.consumerSource;
    if ("queueUrl" in source) return { sqs: this.#sqs, queueUrl: source.queueUrl };
    const kinesis = kinesisClient(this.#backends.clientConfig);
    this.#teardown.push(async () => kinesis.destroy());
    return { stream: new KinesisEventSource(kinesis, source) };
  }

  /** Runs until a stop is requested, then drains; returns the reconciled result. */
  async run(): Promise<DemoResult> {
    const { rows } = await this.#pool.query<{ now: Date }>("select now()");
    this.#since = rows[0]?.now ?? new Date();
    this.#startedAt = performance.now();
    const route = this.#backends.target.path;
    const header =
      `outbox demo: orders service -> ${this.#names.qualified} -> relay (outbox relay, dwell) -> ${route} -> ` +
      `consumer (inbox)${this.#options.chaos ? "   CHAOS ON" : ""}`;
    this.#dashboard = new Dashboard(header);
    if (!process.stdout.isTTY) this.#say(header);

    const consumerStop = new AbortController();
    const consumerDone = this.#consumer.run(consumerStop.signal, (error) => {
      this.#consumerErrors++;
      this.#lastConsumerError = errorMessage(error);
    });
    this.#relay.start();
    const service = new OrdersService(this.#pool, { schema: this.#names.schema, table: this.#names.table });
    const producerDone = runProducer(service, {
      ratePerSecond: this.#options.ratePerSecond,
      openOrders: this.#options.openOrders,
      writers: 4,
      signal: this.#stop.signal,
      onWritten: (written) => this.#written.push(written.id),
      onError: () => this.#writeErrors++,
    });
    if (this.#proxy !== undefined) {
      this.#chaos = new Chaos({
        proxy: this.#proxy,
        relay: this.#relay,
        consumer: this.#consumer,
        event: (text) => this.#event(text),
      });
      this.#chaos.start(this.#options.durationSeconds);
    }
    const timer =
      this.#options.durationSeconds === null
        ? undefined
        : setTimeout(() => this.requestStop(), this.#options.durationSeconds * 1000);

    const live = this.#liveView();
    await producerDone;
    clearTimeout(timer);
    this.#chaos?.stop();

    this.#phase = "draining: the relay publishes what is left";
    const drained = await this.#waitFor(
      async () => (await reconcile(this.#pool, this.#names, this.#written)).unpublished === 0,
      DRAIN_TIMEOUT_MS,
    );
    this.#phase = "catching up: the consumer receives the rest";
    // Dead letters never reach the consumer: waiting for them would only delay the summary that reports them.
    const caughtUp = await this.#waitFor(async () => {
      const state = await reconcile(this.#pool, this.#names, this.#written);
      return state.notConsumed === state.deadLettered;
    }, CATCH_UP_TIMEOUT_MS);
    this.#phase = drained && caughtUp ? "done" : "gave up waiting";
    await this.#relay.stop();
    this.#consumer.cancelCrash(); // a crash asked for that never came (nothing was left to receive)
    consumerStop.abort();
    await consumerDone;
    this.#liveStopped = true;
    await live;
    this.#dashboard.close();
    return this.#result();
  }

  /** Undoes setUp in reverse order, once, whatever state the run ended in. */
  async tearDown(): Promise<void> {
    for (const step of this.#teardown.splice(0).reverse()) await step().catch(() => {});
  }

  #createRelay(): RelayProcess {
    const { aws } = this.#backends;
    const env: Record<string, string | undefined> = {
      ...LOCAL_RELAY_ENV,
      ...this.#backends.target.relayDefaults,
      ...process.env,
      DATABASE_URL: this.#backends.databaseUrl,
      DATABASE_SECRET_ARN: undefined,
      // Exactly one destination (a queue, a bus, or a route table): the relay refuses an ambiguous set.
      OUTBOX_ROUTES: undefined,
      ...this.#backends.target.relayEnv,
      OUTBOX_SCHEMA: this.#names.schema,
      OUTBOX_TABLE: this.#names.table,
      // Through the fault proxy in chaos mode, so the endpoint can fail for the relay alone.
      AWS_ENDPOINT_URL: this.#proxy?.url ?? this.#backends.sqsEndpoint,
      AWS_REGION: aws.region,
      AWS_ACCESS_KEY_ID: aws.accessKeyId,
      AWS_SECRET_ACCESS_KEY: aws.secretAccessKey,
    };
    return new RelayProcess({
      env,
      invocationSeconds: LOCAL_INVOCATION_SECONDS,
      logFile: this.#relayLogFile,
      onStart: (pid, start) => {
        if (start > 1)
          this.#event(`relay started again (pid ${pid}), as the next scheduled invocation would be`);
      },
      onExit: (code, signal, willRestart) => {
        if (signal === "SIGKILL" || !willRestart) return;
        this.#event(
          `relay exited (${signal ?? `code ${code}`}): ${this.#relayLastProblem || "see the relay log"}`,
        );
      },
      onLog: (line) => {
        if (line.level === "WARN" || line.level === "ERROR") {
          this.#relayWarnings++;
          this.#relayLastProblem = `${line.message ?? ""}${typeof line.error === "string" ? `: ${line.error}` : ""}`;
        }
      },
    });
  }

  #event(text: string) {
    this.#dashboard.event(this.#elapsedSeconds(), text);
  }

  #elapsedSeconds() {
    return (performance.now() - this.#startedAt) / 1000;
  }

  async #liveView() {
    while (!this.#liveStopped) {
      try {
        this.#dashboard.update(await this.#liveFigures());
      } catch {
        // A failed refresh (the database busy restarting a connection) just skips a frame.
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }

  async #liveFigures(): Promise<LiveFigures> {
    const figures = await readOutboxFigures(this.#pool, this.#names, this.#since, LIVE_WINDOW_SECONDS);
    const elapsed = this.#elapsedSeconds();
    const window = Math.min(LIVE_WINDOW_SECONDS, Math.max(elapsed, 0.001));
    const lags = this.#consumer.stats.endToEndLagMs.slice(-500);
    const stats = this.#consumer.stats;
    return {
      elapsedSeconds: elapsed,
      durationSeconds: this.#options.durationSeconds,
      written: this.#written.length,
      writtenPerSecond: this.#stop.signal.aborted ? 0 : this.#written.length / Math.max(elapsed, 0.001),
      pending: figures.pending,
      published: figures.published,
      publishedPerSecond: figures.publishedInWindow / window,
      lagP50Ms: figures.lagP50Ms,
      lagP99Ms: figures.lagP99Ms,
      consumed: stats.processed,
      endToEndP50Ms: percentile(lags, 0.5),
      endToEndP99Ms: percentile(lags, 0.99),
      duplicatesSuppressed: stats.duplicates,
      orderViolations: stats.orderViolations,
      lateArrivals: stats.lateArrivals,
      unordered: !keepsOrder(this.#options.destination),
      deadLetters: figures.deadLetters,
      relay: { pid: this.#relay.pid, starts: this.#relay.starts, warnings: this.#relayWarnings },
      phase: this.#phase,
    };
  }

  /** Polls `done` (and keeps the view fresh) until it holds or `timeoutMs` passes. */
  async #waitFor(done: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (await done()) return true;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return done();
  }

  async #result(): Promise<DemoResult> {
    const [figures, reconciled] = await Promise.all([
      readOutboxFigures(this.#pool, this.#names, this.#since, null),
      reconcile(this.#pool, this.#names, this.#written),
    ]);
    const stats = this.#consumer.stats;
    const chaos: ChaosReport | undefined = this.#chaos?.report;
    return {
      options: this.#options,
      elapsedSeconds: this.#elapsedSeconds(),
      reconciled,
      commitToPublish: { p50: figures.lagP50Ms, p99: figures.lagP99Ms },
      commitToConsume: {
        p50: percentile(stats.endToEndLagMs, 0.5),
        p99: percentile(stats.endToEndLagMs, 0.99),
      },
      consumer: stats,
      consumerErrors: this.#consumerErrors,
      lastConsumerError: this.#lastConsumerError,
      writeErrors: this.#writeErrors,
      relay: { starts: this.#relay.starts, kills: this.#relay.kills, warnings: this.#relayWarnings },
      relayLogFile: this.#relayLogFile,
      proxy: this.#proxy?.stats,
      ...(chaos === undefined ? {} : { chaos }),
    };
  }
}

export { printSummary };
