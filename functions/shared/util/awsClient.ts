import http from "node:http";
import https from "node:https";

/**
 * How long connecting to an AWS API may take. The SDK's default is no limit: in a VPC with neither a NAT gateway
 * nor an interface endpoint for the service, the TCP connection never completes and each call hangs until the
 * Lambda times out (155 s for the relay, 300 s for the purge), every minute, with nothing in the log. A regional
 * endpoint answers a connect in milliseconds; 3 s is generous and still fails a cold start well within its limit.
 */
export const AWS_CONNECT_TIMEOUT_MS = 3_000;

/**
 * An SDK package loaded when first needed, once. Each @aws-sdk/client-* costs ~100-400 ms to import on a cold start:
 * the relay's entry point loads only the clients of the destinations it is given (destinations/create.ts), a pool
 * from a URL no Secrets Manager (db/connection.ts). A string literal each, so esbuild still bundles them into the
 * Lambdas' one file (evaluated when imported, not at start).
 */
export function onFirstUse<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    loading ??= load();
    return loading;
  };
}

/** What every AWS client of the Lambdas and the library bounds its requests with (see awsHttpOptions). */
export interface AwsHttpBounds {
  /** Connecting (TCP, TLS); default AWS_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number;
  /** One request, from sending to the end of the response; also the socket's inactivity bound. */
  requestTimeoutMs: number;
  /** Sockets per agent (requests in flight at once); default the SDK's 50. */
  sockets?: number;
}

/**
 * The request handler options that bound every call: a connect timeout, and a request timeout that throws (in
 * @smithy/node-http-handler 4 `requestTimeout` alone only logs a warning unless `throwOnRequestTimeout` is set)
 * plus the same bound on socket inactivity, so an endpoint that accepts the connection and never answers (a
 * black-holing firewall, a proxy without a route) fails the call too.
 */
export function awsHttpOptions(bounds: AwsHttpBounds) {
  const sockets = bounds.sockets ?? 50;
  return {
    connectionTimeout: bounds.connectTimeoutMs ?? AWS_CONNECT_TIMEOUT_MS,
    requestTimeout: bounds.requestTimeoutMs,
    socketTimeout: bounds.requestTimeoutMs,
    throwOnRequestTimeout: true,
    httpsAgent: new https.Agent({ keepAlive: true, maxSockets: sockets }),
    httpAgent: new http.Agent({ keepAlive: true, maxSockets: sockets }),
  };
}

/** Whether an SDK error means the endpoint could not be reached or did not answer (not an AWS error reply). */
export function isUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode !== undefined)
    return false;
  const code = (error as { code?: unknown }).code;
  return (
    error.name === "TimeoutError" ||
    /^(ETIMEDOUT|ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE)$/.test(
      typeof code === "string" ? code : "",
    )
  );
}

/**
 * An error that names the endpoint and the likely cause when `error` says an AWS API was unreachable; else
 * `error` unchanged. `service` is the endpoint's service name in a VPC endpoint (secretsmanager, sqs, events).
 */
export function explainUnreachable(error: unknown, service: string, endpoint: string): unknown {
  if (!isUnreachable(error)) return error;
  return new Error(
    `${endpoint} did not answer (${(error as Error).message}): the function has no route to the ${service} API. ` +
      "A Lambda in a VPC reaches AWS APIs only through a NAT gateway or an interface VPC endpoint " +
      `(com.amazonaws.<region>.${service}, private DNS on) whose security group admits the function's security ` +
      "group on 443; check the subnets' route tables, the endpoint and both security groups",
    { cause: error },
  );
}

/**
 * The endpoint a client of `service` calls, for error messages: the AWS_ENDPOINT_URL_<SERVICE> or AWS_ENDPOINT_URL
 * override (what the SDK itself reads), else the service's regional endpoint (its host depends on the partition).
 */
export function endpointFor(
  service: string,
  envKey: string,
  region: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  return endpointInUse(
    undefined,
    envKey,
    `the ${service} endpoint of ${region ?? env.AWS_REGION ?? "the function's region"}`,
    env,
  );
}

/**
 * Where a client sends, as the SDK picks it (Reference guide, "Service-specific endpoints"): the client's own
 * `endpoint`, else AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL, unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is
 * true; else `regional`. A message that names the regional endpoint while the client talked to an emulator or a
 * proxy sends the reader to the wrong place.
 */
export function endpointInUse(
  explicit: string | undefined,
  envKey: string,
  regional: string,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (explicit !== undefined) return explicit;
  if (env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS?.toLowerCase() === "true") return regional;
  return env[`AWS_ENDPOINT_URL_${envKey}`] ?? env.AWS_ENDPOINT_URL ?? regional;
}
