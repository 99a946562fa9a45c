import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A `docker` that fails loudly, for CDK_DOCKER: a synthesis that falls back to Docker bundling fails with
 * "docker was called" instead of waiting for an engine these machines do not have.
 */
export function forbiddenDocker(dir: string): string {
  const docker = join(dir, "docker-forbidden");
  writeFileSync(docker, '#!/bin/sh\necho "docker was called: $*" >&2\nexit 97\n');
  chmodSync(docker, 0o755);
  return docker;
}

/** cfn-lint on a synthesized template; a missing cfn-lint is an error that says how to install it. */
export function cfnLint(templateFile: string, env: NodeJS.ProcessEnv): SpawnSyncReturns<string> {
  const lint = spawnSync(
    "cfn-lint",
    // W3005 (a DependsOn that a GetAtt already implies) is how CDK always orders a function after its role and
    // that role's policy; it is redundant, not wrong.
    ["--ignore-checks", "W3005", "--", templateFile],
    { encoding: "utf8", timeout: 120_000, env },
  );
  if ((lint.error as NodeJS.ErrnoException | undefined)?.code === "ENOENT") {
    throw new Error(
      "cfn-lint is not on PATH. Install it (Python 3.9+): `python3 -m pip install cfn-lint`, " +
        "or `pipx install cfn-lint`; then check `cfn-lint --version`.",
    );
  }
  return lint;
}
