import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { BUNDLE_FILE, buildLambda } from "../../scripts/lambdaBundles.ts";
import { median } from "../lib/stats.ts";

export interface RelayBundle {
  bytes: number;
  gzipBytes: number;
  /** Median ms to import the bundle (module evaluation, cold start's init), fresh process each time. */
  importMs: number;
  /** Median ms from process start to the handler module evaluated. */
  processToReadyMs: number;
  samples: number;
}

const COLD_STARTS = 7;

/**
 * The relay Lambda's bundle, built as the package's prebuilt code is (scripts/lambdaBundles.ts), and its cold
 * start: a fresh `node` (the Lambda sets no NODE_OPTIONS) importing it with the env the handler
 * reads at init.
 */
export async function measureRelayBundle(env: Record<string, string>): Promise<RelayBundle> {
  const dir = await mkdtemp(join(tmpdir(), "relay-bundle-"));
  try {
    const built = await buildLambda("relay", dir);
    const outfile = join(built.dir, BUNDLE_FILE);
    const code = await readFile(outfile);
    const starts: { importMs: number; readyMs: number }[] = [];
    for (let i = 0; i < COLD_STARTS; i++) starts.push(await coldStart(outfile, env));
    return {
      bytes: code.length,
      gzipBytes: gzipSync(code).length,
      importMs: median(starts.map((start) => start.importMs)),
      processToReadyMs: median(starts.map((start) => start.readyMs)),
      samples: COLD_STARTS,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function coldStart(bundle: string, env: Record<string, string>) {
  // performance.now() counts from the process's time origin, so the second number includes Node's own start.
  const probe = `const t = performance.now(); await import(${JSON.stringify(pathToFileURL(bundle).href)});
    process.stdout.write(JSON.stringify({ importMs: performance.now() - t, readyMs: performance.now() }));`;
  return new Promise<{ importMs: number; readyMs: number }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", probe], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk;
    });
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk;
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code === 0) resolve(JSON.parse(out));
      else reject(new Error(`bundle import failed (exit ${code}): ${err.trim()}`));
    });
  });
}
