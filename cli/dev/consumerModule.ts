/**
 * `--consumer ./src/handler.ts[#name]`: the user's Lambda handler, imported as their Node imports it (Node 22.18+
 * and 24 strip TypeScript types natively; "Modules: TypeScript" in the Node docs), the default export or the
 * named one. Every way it can be wrong is one line naming the flag and the fix, before anything starts.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { CliError, EXIT_USAGE } from "../errors.ts";

/** A Lambda handler: `(event, context, callback)`, async or calling back. */
export type LambdaFunction = (
  event: unknown,
  context: unknown,
  callback: (error?: unknown, result?: unknown) => void,
) => unknown;

export interface ConsumerModule {
  /** As given, for messages. */
  spec: string;
  handler: LambdaFunction;
}

export function parseConsumerSpec(spec: string): { file: string; exportName: string } {
  const hash = spec.lastIndexOf("#");
  if (hash === -1) return { file: spec, exportName: "default" };
  const exportName = spec.slice(hash + 1);
  if (!/^[A-Za-z_$][\w$]*$/.test(exportName)) {
    throw new CliError(`--consumer ${spec}: "${exportName}" after # is not an export name`, EXIT_USAGE);
  }
  return { file: spec.slice(0, hash), exportName };
}

/** Imports the module; its top level runs now, with the environment `outbox dev` set (DATABASE_URL, ...). */
export async function loadConsumer(spec: string, cwd: string): Promise<ConsumerModule> {
  const { file, exportName } = parseConsumerSpec(spec);
  const path = resolve(cwd, file);
  if (!existsSync(path)) {
    throw new CliError(`--consumer ${spec}: no such file (${path})`, EXIT_USAGE);
  }
  let loaded: Record<string, unknown>;
  try {
    loaded = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    throw importFailed(spec, path, error);
  }
  const handler = loaded[exportName];
  if (typeof handler !== "function") {
    const functions = Object.keys(loaded).filter((name) => typeof loaded[name] === "function");
    const hint =
      functions.length === 0
        ? "it exports no function"
        : `its function exports: ${functions.join(", ")}; pass --consumer ${file}#${functions[0]}`;
    const what =
      exportName === "default"
        ? "has no default export that is a function"
        : `exports no function named ${exportName}`;
    throw new CliError(`--consumer ${spec}: ${path} ${what} (${hint})`, EXIT_USAGE);
  }
  return { spec, handler: handler as LambdaFunction };
}

function importFailed(spec: string, path: string, error: unknown): CliError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ERR_UNKNOWN_FILE_EXTENSION" && path.endsWith(".ts")) {
    return new CliError(
      `--consumer ${spec}: Node ${process.version} does not load TypeScript; use Node 22.18 or later (types are ` +
        "stripped natively), or point --consumer at the compiled .js",
      EXIT_USAGE,
      { cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(`--consumer ${spec}: importing ${path} failed: ${message}`, EXIT_USAGE, {
    cause: error,
  });
}
