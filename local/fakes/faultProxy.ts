/**
 * A small HTTP proxy in front of a real SQS endpoint (moto, LocalStack, or AWS itself) that makes the endpoint
 * misbehave on demand, for `npm start --chaos`. Unlike local/fakes/fakeSqs.ts it does not emulate SQS: every request
 * that is let through is answered by the real endpoint, so what the relay sees after a fault is real.
 *
 * Faults:
 * - an outage: every request is answered 503 ServiceUnavailable, as SQS does when it is unwell;
 * - a trap on the next SendMessageBatch that SQS accepts: the proxy forwards the request, receives SQS's
 *   answer, runs a callback (the demo SIGKILLs the relay there), and never delivers the answer. This is the
 *   relay dying after SQS accepted a batch and before it recorded it, without any timing luck.
 */
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface AcceptedBatch {
  /** MessageDeduplicationIds (= outbox ids) of the entries SQS reported successful. */
  acceptedIds: string[];
}

export interface FaultProxyStats {
  forwarded: number;
  /** Requests answered 503 during an outage. */
  refused: number;
  /** Accepted batches whose answer was withheld by a trap. */
  swallowed: number;
}

export interface FaultProxy {
  url: string;
  stats: FaultProxyStats;
  /** Answer every request with 503 for `ms` milliseconds. */
  failFor(ms: number): void;
  readonly failing: boolean;
  /**
   * On the next SendMessageBatch that SQS accepts (at least one entry successful), call `onAccepted` and withhold
   * SQS's answer from the caller. Resolves with what SQS accepted, after `onAccepted` has finished.
   */
  trapNextAcceptedBatch(onAccepted: (batch: AcceptedBatch) => Promise<void>): Promise<AcceptedBatch>;
  /** Forget a trap that has not fired yet. */
  disarm(): void;
  close(): Promise<void>;
}

interface Trap {
  onAccepted(batch: AcceptedBatch): Promise<void>;
  resolve(batch: AcceptedBatch): void;
}

const SEND_BATCH_TARGET = "AmazonSQS.SendMessageBatch";

export interface FaultProxyOptions {
  /**
   * The clock an outage's length is measured on (default: the wall clock). A test gives its own, to make an
   * outage last across as many relay rounds as it takes without waiting out its length.
   */
  now?: () => number;
}

export async function startFaultProxy(target: string, options: FaultProxyOptions = {}): Promise<FaultProxy> {
  const now = options.now ?? Date.now;
  const upstream = new URL(target);
  const stats: FaultProxyStats = { forwarded: 0, refused: 0, swallowed: 0 };
  let failingUntil = 0;
  let trap: Trap | undefined;

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const body = await readBody(req);
    if (now() < failingUntil) {
      stats.refused++;
      // The answer in the caller's own protocol: SQS's JSON 1.0 (with its query-compatible error header), or the
      // JSON protocol of another service behind the proxy (Kinesis: application/x-amz-json-1.1).
      const sqs = String(req.headers["x-amz-target"] ?? "").startsWith("AmazonSQS.");
      res.writeHead(503, {
        "content-type": sqs
          ? "application/x-amz-json-1.0"
          : String(req.headers["content-type"] ?? "application/x-amz-json-1.1"),
        ...(sqs ? { "x-amzn-query-error": "ServiceUnavailable;Receiver" } : {}),
      });
      res.end(
        JSON.stringify({
          __type: sqs ? "com.amazonaws.sqs#ServiceUnavailable" : "ServiceUnavailable",
          message: sqs ? "chaos: SQS endpoint down" : "chaos: endpoint down",
        }),
      );
      return;
    }
    stats.forwarded++;
    const answer = await forward(upstream, req, body);
    const armed = trap;
    if (armed !== undefined && req.headers["x-amz-target"] === SEND_BATCH_TARGET && answer.status === 200) {
      const acceptedIds = acceptedDedupIds(body, answer.body);
      if (acceptedIds.length > 0) {
        trap = undefined;
        stats.swallowed++;
        const batch = { acceptedIds };
        await armed.onAccepted(batch);
        res.destroy(); // the caller never learns that SQS took the batch
        armed.resolve(batch);
        return;
      }
    }
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    failFor(ms) {
      failingUntil = now() + ms;
    },
    get failing() {
      return now() < failingUntil;
    },
    trapNextAcceptedBatch(onAccepted) {
      return new Promise((resolve) => {
        trap = { onAccepted, resolve };
      });
    },
    disarm() {
      trap = undefined;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

interface Answer {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/** Forwards with the original headers (Host included: emulators build queue URLs from it). */
function forward(upstream: URL, req: IncomingMessage, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        protocol: upstream.protocol,
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (incoming) => {
        readBody(incoming).then((answerBody) => {
          const headers: Record<string, string | string[]> = {};
          for (const [name, value] of Object.entries(incoming.headers)) {
            if (value !== undefined && name !== "transfer-encoding" && name !== "connection")
              headers[name] = value;
          }
          headers["content-length"] = String(answerBody.length);
          resolve({ status: incoming.statusCode ?? 502, headers, body: answerBody });
        }, reject);
      },
    );
    outgoing.on("error", reject);
    outgoing.end(body);
  });
}

/** The dedup ids of the entries SQS reported successful (entry Ids map back to the request's entries). */
function acceptedDedupIds(requestBody: Buffer, answerBody: Buffer): string[] {
  try {
    const sent = JSON.parse(requestBody.toString()) as {
      Entries?: { Id?: string; MessageDeduplicationId?: string }[];
    };
    const answer = JSON.parse(answerBody.toString()) as { Successful?: { Id?: string }[] };
    const dedupById = new Map((sent.Entries ?? []).map((entry) => [entry.Id, entry.MessageDeduplicationId]));
    return (answer.Successful ?? []).flatMap((entry) => dedupById.get(entry.Id) ?? []);
  } catch {
    return [];
  }
}
