/**
 * `outbox dev`: a database, local AWS, the destinations, the relay and the purge, and the user's consumer, in
 * this one process, until a signal. Everything that can be checked without starting anything is checked first;
 * after that each part started pushes its stop, and any failure (or the signal) runs the stops in reverse, so
 * nothing is left half-started and no process outlives the command.
 */

import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { SQSClient } from "@aws-sdk/client-sqs";
import { errorMessage } from "../../functions/shared/outbox/errors.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import type { Logger } from "../../functions/shared/util/logger.ts";
import { sleep } from "../../functions/shared/util/sleep.ts";
import { CliError, describeError, EXIT_USAGE } from "../errors.ts";
import { relayLoop } from "../relayLoop.ts";
import { loadConsumer, parseConsumerSpec } from "./consumerModule.ts";
import {
  createNamedTarget,
  createTarget,
  kinesisClient,
  type LocalDestination,
  type LocalTarget,
  type TargetClients,
} from "./destinations.ts";
import { openDevDatabase } from "./devDatabase.ts";
import { addressesOf, banner, devEnvironment, writeDevEnv } from "./devEnv.ts";
import { createPayloadBucket, writeDevLimits } from "./devLimits.ts";
import { DevView } from "./devView.ts";
import { EventSources } from "./eventSources.ts";
import type { TerminalOutput } from "./liveBlock.ts";
import { LOCAL_AWS, startLocalAws } from "./localAws.ts";
import { LOCAL_RELAY_ENV, localInvocationMs, startPurgeTimer } from "./localRelay.ts";
import { readOutboxFigures } from "./outboxFigures.ts";
import { requireFreePort } from "./portCheck.ts";
import { type RoutesFile, readRoutesFile } from "./routesFile.ts";

export interface DevOptions {
  /** The project's folder: `.outbox/` goes here, --consumer and --routes are relative to it. */
  cwd: string;
  databaseUrl: string | undefined;
  databasePort: number;
  reset: boolean;
  destination: LocalDestination;
  routes: string | undefined;
  consumer: string | undefined;
  awsEndpoint: string | undefined;
  port: number;
  /** The source of the events on an EventBridge bus, which the bus's rule matches. */
  eventSource: string;
  /** The consumer's queues' visibility timeout: how long a failed record waits before it is delivered again. */
  visibilityTimeoutSeconds: number;
  env: Env;
  out: TerminalOutput;
}

/** Stable names, so the addresses in .outbox/dev.env stay the same from one start to the next. */
const RESOURCE_NAME = "outbox-dev";
const FIGURES_EVERY_MS = 1_000;
const RATE_WINDOW_SECONDS = 5;

export async function runDev(options: DevOptions, signal: AbortSignal): Promise<void> {
  // Checked before anything starts: the inputs that need no server.
  const routes = options.routes === undefined ? undefined : await readRoutesFile(options.routes, options.cwd);
  if (options.consumer !== undefined) {
    const { file } = parseConsumerSpec(options.consumer);
    if (!existsSync(resolve(options.cwd, file))) {
      throw new CliError(
        `--consumer ${options.consumer}: no such file (${resolve(options.cwd, file)})`,
        EXIT_USAGE,
      );
    }
  }
  if (options.awsEndpoint === undefined)
    await requireFreePort(options.port, "--port", "the local AWS endpoint");

  const stops: (() => Promise<void>)[] = [];
  const problems: string[] = [];
  let view: DevView | undefined;
  const say = (text: string) => (view === undefined ? problems.push(text) : view.problem(text));
  const logger = devLogger(say);
  try {
    const dir = join(options.cwd, ".outbox");
    const names = outboxNames({});
    const db = await openDevDatabase({
      databaseUrl: options.databaseUrl,
      dir,
      databasePort: options.databasePort,
      reset: options.reset,
      location: {},
      inbox: options.consumer !== undefined,
      env: options.env,
      log: (line) => say(`postgres: ${line.trim()}`),
    });
    stops.push(db.stop);
    const aws = await startLocalAws({ endpoint: options.awsEndpoint, port: options.port });
    stops.push(aws.close);
    const clients: TargetClients = {
      sqs: new SQSClient({ ...LOCAL_AWS, endpoint: aws.url }),
      config: { ...LOCAL_AWS, endpoint: aws.url },
      eventSource: options.eventSource,
      name: () => RESOURCE_NAME,
      visibilityTimeoutSeconds: options.visibilityTimeoutSeconds,
    };
    stops.push(async () => clients.sqs.destroy());
    const targets = await createTargets(options.destination, routes, clients);

    const env = devEnvironment({
      databaseUrl: db.url,
      awsEndpoint: aws.url,
      addresses: addressesOf(targets),
    });
    // The consumer's module and the SDK clients it makes read these, as the user's app will.
    Object.assign(process.env, env);
    const consumer =
      options.consumer === undefined ? undefined : await loadConsumer(options.consumer, options.cwd);

    const relayEnv: Env = {
      ...LOCAL_RELAY_ENV,
      ...(targets[0]?.relayDefaults ?? {}),
      ...options.env,
      ...env,
      DATABASE_SECRET_ARN: undefined,
      OUTBOX_QUEUE_URL: undefined,
      OUTBOX_EVENT_BUS_NAME: undefined,
      OUTBOX_ROUTES: undefined,
      ...(routes === undefined ? (targets[0]?.relayEnv ?? {}) : { OUTBOX_ROUTES: routes.text }),
    };
    relayEnv.OUTBOX_PAYLOAD_BUCKET ??= await createPayloadBucket(clients.config);
    const relayConfig = relayConfigFromEnv(relayEnv);
    const limits = await db.database.withSession((client) =>
      writeDevLimits(client, names, relayConfig.destination, LOCAL_AWS.region),
    );
    const relayStop = new AbortController();
    const relayStarted = Promise.withResolvers<void>();
    const relayDone = relayLoop(relayConfig, {
      endpoint: aws.url,
      invocationMs: localInvocationMs(relayConfig),
      logger,
      signal: relayStop.signal,
      onStarted: () => relayStarted.resolve(),
    });
    relayDone.catch((error: unknown) => relayStarted.reject(error));
    stops.push(async () => {
      relayStop.abort();
      await relayDone.catch(() => {});
    });
    await relayStarted.promise;
    stops.push(startPurgeTimer(db.database.pool, relayEnv, logger));
    // Written once everything runs: a file there means an `outbox dev` that started.
    const envFile = await writeDevEnv(dir, env);

    view = new DevView(
      banner({
        source: db.source,
        aws: aws.source,
        envFile,
        env,
        targets,
        consumer: options.consumer,
        applied: db.applied,
        limits,
      }),
      options.out,
    );
    const shown = view;
    stops.push(async () => shown.close());
    for (const text of problems.splice(0)) view.problem(text);

    let sources: EventSources | undefined;
    if (consumer !== undefined) {
      sources = new EventSources(consumer.handler, {
        onDelivery: (notes) => shown.delivered(notes),
        onHandlerError: (source, error) =>
          shown.problem(`handler failed on ${source}: ${errorMessage(error)}`),
        onSourceError: (source, error) => shown.problem(`cannot poll ${source}: ${errorMessage(error)}`),
      });
      const kinesis = () => {
        const client = kinesisClient(clients.config);
        stops.push(async () => client.destroy());
        return client;
      };
      for (const target of targets) sources.start(target.consumerSource, { sqs: clients.sqs, kinesis });
      const started = sources;
      stops.push(() => started.stop());
    }

    const since = new Date();
    // Until the signal, or until the relay gives up (its database or endpoint gone for good).
    const relayFailed = relayDone.then(
      () => undefined,
      (error: unknown) => error,
    );
    while (!signal.aborted) {
      try {
        const outbox = await db.database.withSession((client) =>
          readOutboxFigures(client, names, since, RATE_WINDOW_SECONDS),
        );
        shown.update({
          outbox,
          publishedPerSecond: outbox.publishedInWindow / RATE_WINDOW_SECONDS,
          consumer: sources?.stats,
        });
      } catch (error) {
        if (!signal.aborted) shown.problem(`cannot read the outbox's figures: ${errorMessage(error)}`);
      }
      const failed = await Promise.race([sleep(FIGURES_EVERY_MS, signal).then(() => undefined), relayFailed]);
      if (failed !== undefined) throw describeError(failed, { databaseUrl: db.url });
    }
  } finally {
    for (const stop of stops.reverse()) {
      await stop().catch((error: unknown) =>
        process.stderr.write(`outbox dev: stopping: ${errorMessage(error)}\n`),
      );
    }
    if (view === undefined) for (const text of problems) process.stderr.write(`outbox dev: ${text}\n`);
  }
}

async function createTargets(
  destination: LocalDestination,
  routes: RoutesFile | undefined,
  clients: TargetClients,
): Promise<LocalTarget[]> {
  if (routes === undefined) return [await createTarget(destination, clients)];
  const targets: LocalTarget[] = [];
  for (const setting of routes.destinations) targets.push(await createNamedTarget(setting, clients));
  return targets;
}

/** The relay's and the purge's log: warnings and errors go to the view, the routine lines nowhere. */
function devLogger(say: (text: string) => void): Logger {
  const line = (level: string) => (message: string, fields: Record<string, unknown>) => {
    const details = Object.entries(fields)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
      .join(" ");
    say(`relay ${level}: ${message}${details === "" ? "" : ` (${details})`}`);
  };
  return { info: () => {}, warn: line("warning"), error: line("error") };
}
