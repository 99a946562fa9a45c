import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The relay code an upgrading user still runs while the migrations are applied: taken from git history, not
 * from a copy kept in the tree. A checked-in copy of old SQL would test what we remember the old relay did;
 * the commit is what users deployed, with its claim, its transaction shape (claim, publish while the
 * transaction stays open, record) and its timeouts. It is extracted with `git archive` into a folder inside
 * the repository (.tmp/, git-ignored), so its imports (pg, the AWS SDK) resolve to this checkout's node_modules, and
 * imported as TypeScript like the rest of the tests.
 *
 * `PREVIOUS_RELAY_COMMIT` is the relay of the earliest users' schema: the last commit whose migrations were
 * 0001 and 0002 (2026-11-29, "Opt-in LISTEN/NOTIFY wake-up"), the relay the issue's manual upgrade ran. Being
 * several migrations behind, it is also one migration behind every file applied after 0002. A shallow clone
 * lacks it: the error says how to fetch the history (the workflow checks out with fetch-depth: 0).
 */
export const PREVIOUS_RELAY_COMMIT = "4734ecd46e8af43e78654938acd601953be3556b";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface PreviousRelayModule {
  runRelay(
    deps: {
      pool: { connect(): Promise<unknown> };
      sqs: unknown;
      deadline: number;
      signal?: AbortSignal;
      onRound?(report: { claimed: number; published: number; failed: number; durationMs: number }): void;
      logger?: {
        info(message: string, fields: object): void;
        warn(message: string, fields: object): void;
        error(message: string, fields: { error?: unknown }): void;
      };
    },
    options: Record<string, unknown>,
  ): Promise<{ published: number; failedRounds: number; lastError?: string; stoppedBy: string }>;
  DEFAULT_RELAY_OPTIONS: Record<string, unknown>;
}

export async function loadPreviousRelay(commit = PREVIOUS_RELAY_COMMIT): Promise<PreviousRelayModule> {
  try {
    execFileSync("git", ["cat-file", "-e", `${commit}^{commit}`], { cwd: ROOT, stdio: "ignore" });
  } catch (error) {
    throw new Error(
      `the upgrade test runs the previous relay from git history, and commit ${commit} is not in this clone ` +
        "(a shallow clone?): run `git fetch --unshallow`, or check out with fetch-depth: 0",
      { cause: error },
    );
  }
  const dir = join(ROOT, ".tmp", "previous-relay", commit.slice(0, 12));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = execFileSync("git", ["archive", "--format=tar", commit, "functions/shared"], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  execFileSync("tar", ["-x", "-C", dir], { input: archive });
  return (await import(join(dir, "functions/shared/relay.ts"))) as PreviousRelayModule;
}
