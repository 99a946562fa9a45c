import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../functions/shared/outbox/payloadPointer.ts";
import { DEFAULT_RELAY_OPTIONS, roundReserveMs } from "../../functions/shared/relay/engine.ts";
import { DEFAULT_CONSUMER_TIMEOUT, VISIBILITY_TIMEOUT_FACTOR } from "../../infra/consumer.ts";
import {
  DEFAULT_BUDGET_MARGIN_MS,
  DEFAULT_TARGET_EVENTS_PER_SECOND,
  HANDLER_SLACK_MS,
  LAMBDA_MB_PER_VCPU,
  PAYLOAD_COPIES,
  RELAY_BASE_MEMORY_MB,
  RELAY_EVENTS_PER_VCPU,
  RELAY_MAX_EVENTS_PER_INVOCATION,
  relayMemory,
  relayTiming,
  throughputMemoryMb,
} from "../../infra/relayTiming.ts";
import { REPOSITORY, read, tableUnder } from "./markdown.ts";

/**
 * The numbers the docs quote that the code defines or the build produces, held to the constant or the measurement:
 * a constant changed in code fails here, naming the page and what it says. And every file the docs name exists.
 */

const DOCS = [
  "README.md",
  "CONTRIBUTING.md",
  "CHANGELOG.md",
  ...readdirSync(join(REPOSITORY, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];
/** A doc's prose with line breaks as spaces, so a claim wrapped over two lines is still one match. */
const prose = (doc: string) => read(doc).replace(/\s*\n\s*/g, " ");
const number = (text: string) => Number(text.replace(/[,_ ]/g, ""));

/** Every match of `pattern` in every doc, with where it is. */
function claims(pattern: RegExp): { doc: string; text: string; groups: string[] }[] {
  return DOCS.flatMap((doc) =>
    [...prose(doc).matchAll(pattern)].map((match) => ({
      doc,
      text: match[0],
      groups: match.slice(1).map((group) => group ?? ""),
    })),
  );
}

const d = DEFAULT_RELAY_OPTIONS;
/** How many statement timeouts a round reserves besides its publish: the code's formula, read back from it. */
const RESERVE_STATEMENTS = roundReserveMs({ ...d, publishTimeoutMs: 0, statementTimeoutMs: 1 });

describe("numbers the docs quote from the code", () => {
  it("a round's reserve: publish timeout + N x statement timeout, N as roundReserveMs has it", () => {
    const found = claims(/publish[\w ]{0,20}?`?\s*\+\s*(\d+)\s*[x×]\s*`?(?:RELAY_STATEMENT|statement)/gi);
    expect(found.length).toBeGreaterThanOrEqual(3);
    expect(found.filter(({ groups }) => number(groups[0] ?? "") !== RESERVE_STATEMENTS)).toEqual([]);
    // With the defaults' numbers: "10 + 3 x 5 = 25 s".
    const publishS = d.publishTimeoutMs / 1000;
    const worked = claims(new RegExp(`\\b${publishS} \\+ (\\d+) [x×] (\\d+) = (\\d+) s`, "g"));
    expect(worked.length).toBeGreaterThanOrEqual(1);
    const reserveS = roundReserveMs(d) / 1000;
    expect(
      worked.filter(
        ({ groups: [n, statement, total] }) =>
          number(n ?? "") !== RESERVE_STATEMENTS ||
          number(statement ?? "") !== d.statementTimeoutMs / 1000 ||
          number(total ?? "") !== reserveS,
      ),
    ).toEqual([]);
  });

  it("the construct's throughput sizing: events/s per vCPU, MB per vCPU, the per-invocation cap and default", () => {
    const perVcpu = claims(/(?:siz(?:ed|es|ing) at|\bat(?: the)?) \**([\d,]+)\** (?:events\/s )?per vCPU/g);
    expect(perVcpu.length).toBeGreaterThanOrEqual(3);
    expect(perVcpu.filter(({ groups }) => number(groups[0] ?? "") !== RELAY_EVENTS_PER_VCPU)).toEqual([]);
    const mbPerVcpu = claims(/(?:1|one) vCPU at ([\d,]+) MB/g);
    expect(mbPerVcpu.length).toBeGreaterThanOrEqual(2);
    expect(mbPerVcpu.filter(({ groups }) => number(groups[0] ?? "") !== LAMBDA_MB_PER_VCPU)).toEqual([]);
    const props = tableUnder("docs/deploy.md", "Props").rows;
    const row = (name: string) => props.find(([cell]) => cell === `\`${name}\``) ?? [];
    const target = row("relay.targetEventsPerSecond");
    expect(number(target[1] ?? "")).toBe(DEFAULT_TARGET_EVENTS_PER_SECOND);
    expect(target[2]).toContain(`At most ${RELAY_MAX_EVENTS_PER_INVOCATION.toLocaleString("en-US")}`);
    expect(row("relay.memorySize")[1]).toBe(
      `derived (${relayMemory({ ...d, maxMessageBytes: 1_048_576 }).memoryMb.toLocaleString("en-US")} MB)`,
    );
  });

  it("the relay's memory arithmetic in deploy.md: base + copies x rounds x round MiB, the payload term, the CPU term", () => {
    const memory = relayMemory({ ...d, maxMessageBytes: 1_048_576 });
    const deploy = prose("docs/deploy.md");
    const formula = /(\d+) \+ (\d+) x (\d+) x (\d+) = \*\*(\d+) MB\*\*/.exec(deploy);
    expect(formula?.slice(1).map(number)).toEqual([
      RELAY_BASE_MEMORY_MB,
      PAYLOAD_COPIES,
      d.parallelRounds,
      memory.roundBytes / 1_048_576,
      memory.payloadMb,
    ]);
    const withLargePayloads = relayMemory({
      ...d,
      maxMessageBytes: 1_048_576,
      maxPayloadBytes: MAX_PAYLOAD_BYTES_LIMIT,
    });
    const says = (text: string) =>
      expect(deploy.includes(text), `docs/deploy.md should say "${text}"`).toBe(true);
    says(`${memory.payloadMb} MB by default, ${withLargePayloads.payloadMb} MB with \`largePayloads\``);
    says(`${DEFAULT_TARGET_EVENTS_PER_SECOND.toLocaleString("en-US")} by default`);
    says(`**${throughputMemoryMb(DEFAULT_TARGET_EVENTS_PER_SECOND).toLocaleString("en-US")} MB**`);
  });

  it("the consumer queue's visibility timeout: 30 s, or the factor AWS advises times the consumer's timeout", () => {
    const row = tableUnder("docs/deploy.md", "Props").rows.find(
      ([cell]) => cell === "`consumerVisibilityTimeout`",
    );
    const timeout = DEFAULT_CONSUMER_TIMEOUT.toSeconds();
    expect(row?.[1]).toBe(
      `30 s; with \`consumer\`, ${VISIBILITY_TIMEOUT_FACTOR}× its timeout (${VISIBILITY_TIMEOUT_FACTOR * timeout} s)`,
    );
    expect(read("infra/outboxRelay.ts")).toContain(
      `${VISIBILITY_TIMEOUT_FACTOR} x its timeout (${VISIBILITY_TIMEOUT_FACTOR * timeout} s for the default ${timeout} s)`,
    );
  });

  it("the relay's dwell cap and timeout on a 1-minute schedule, with and without largePayloads, as relayTiming has them", () => {
    const timing = relayTiming({ scheduleSeconds: 60 });
    const large = relayTiming({ scheduleSeconds: 60, maxMessageBytes: MAX_PAYLOAD_BYTES_LIMIT });
    const deploy = prose("docs/deploy.md");
    const dwell =
      /`RELAY_MAX_DURATION_MS` = 60 \+ 60 \(jitter\) \+ (\d+) \(hand-over\) \+ (\d+) = \*\*(\d+) s\*\*/.exec(
        deploy,
      );
    expect(dwell?.slice(1).map(number)).toEqual([
      timing.handoverAllowanceMs / 1000,
      timing.roundReserveMs / 1000,
      timing.maxDurationMs / 1000,
    ]);
    const timeout =
      /Timeout = (\d+) \+ (\d+) \(budget margin\) \+ (\d+) \(slack[^)]*\) = \*\*(\d+) s\*\*/.exec(deploy);
    expect(timeout?.slice(1).map(number)).toEqual([
      timing.maxDurationMs / 1000,
      DEFAULT_BUDGET_MARGIN_MS / 1000,
      HANDLER_SLACK_MS / 1000,
      timing.timeoutSeconds,
    ]);
    // Every "N s timeout" (or "timeout N s") a page gives the relay is one of the two.
    const timeouts = claims(/\b(\d{3}) s timeout|timeout (\d{3}) s/g).filter(
      ({ doc }) => doc !== "docs/benchmarks.md" && doc !== "CHANGELOG.md",
    );
    expect(timeouts.length).toBeGreaterThanOrEqual(3);
    expect(
      timeouts.filter(({ groups }) => {
        const seconds = number(groups[0] || groups[1] || "");
        return seconds !== timing.timeoutSeconds && seconds !== large.timeoutSeconds;
      }),
    ).toEqual([]);
  });

  it("README's bill is cost.md's: the monthly total and the relay Lambda's part", () => {
    const cost = prose("docs/cost.md");
    const readme = prose("README.md");
    const total = /\*\*about \$(\d+) a month\*\* before any event/.exec(cost)?.[1];
    const lambda = /one relay target costs \*\*about \$([\d.]+) a month in Lambda/.exec(cost)?.[1];
    expect(total).toBeDefined();
    expect(lambda).toBeDefined();
    expect(readme).toContain(`about **$${total} a month** per outbox`);
    expect(readme).toContain(`$${lambda} of relay Lambda`);
  });

  it("commands a user runs exist in an installed app: `npx outbox migrate`, not the clone's `npm run migrate`", () => {
    const userDocs = DOCS.filter((doc) => doc !== "CONTRIBUTING.md" && doc !== "CHANGELOG.md");
    expect(claims(/npm run migrate\b/g).filter(({ doc }) => userDocs.includes(doc))).toEqual([]);
  });

  it("destination limits: no doc gives EventBridge 256 KiB beside the others (it takes 1 MB a request)", () => {
    expect(claims(/256 KiB on (?:SNS and )?EventBridge|EventBridge(?: and SNS)?:? 256 KiB/g)).toEqual([]);
    expect(prose("docs/large-payloads.md")).toMatch(
      /1 MiB on SQS, 256 KiB on SNS, 1 MB per PutEvents request/,
    );
  });
});

/** Sizes the build measures, held within this fraction of what the docs say. */
const TOLERANCE = 0.1;
const KIB = 1024;

describe("sizes the docs quote from the build (npm run build)", () => {
  const within = (documented: number, measured: number) =>
    Math.abs(documented - measured) <= measured * TOLERANCE;

  it("deploy.md's bundle table: each Lambda bundle's size and gzip size", () => {
    const rows = tableUnder("docs/deploy.md", "Lambda code: prebuilt", "bundle").rows.filter(([name]) =>
      ["relay", "purge", "migrate"].includes(name ?? ""),
    );
    expect(rows.map(([name]) => name)).toEqual(["relay", "purge", "migrate"]);
    const problems = rows.flatMap(([name = "", size = "", gzip = ""]) => {
      const file = join(REPOSITORY, "dist", "lambda", name, "index.mjs");
      if (!existsSync(file)) return [`${file} is missing: run \`npm run build\` first`];
      const bytes = readFileSync(file);
      const measured = { size: bytes.length / KIB, gzip: gzipSync(bytes).length / KIB };
      const documented = { size: number(size.replace(" KiB", "")), gzip: number(gzip.replace(" KiB", "")) };
      return (["size", "gzip"] as const).flatMap((what) =>
        within(documented[what], measured[what])
          ? []
          : [
              `docs/deploy.md: ${name} ${what} ${documented[what]} KiB, the build's is ${Math.round(measured[what])} KiB`,
            ],
      );
    });
    expect(problems).toEqual([]);
  });

  it("deploy.md's tarball: its size and unpacked size, as npm pack reports them", () => {
    const [packed] = JSON.parse(
      execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
        cwd: REPOSITORY,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }),
    ) as { size: number; unpackedSize: number }[];
    const said = /packed tarball is about ([\d,]+) KiB \(([\d.]+) MiB unpacked\)/.exec(
      prose("docs/deploy.md"),
    );
    expect(said, "deploy.md: 'The packed tarball is about N KiB (M MiB unpacked)'").not.toBeNull();
    const size = (packed?.size ?? 0) / KIB;
    const unpacked = (packed?.unpackedSize ?? 0) / KIB / KIB;
    expect(
      within(number(said?.[1] ?? ""), size),
      `deploy.md says ${said?.[1]} KiB, npm pack ${Math.round(size)} KiB`,
    ).toBe(true);
    expect(
      within(Number(said?.[2]), unpacked),
      `deploy.md says ${said?.[2]} MiB unpacked, npm pack ${unpacked.toFixed(1)} MiB`,
    ).toBe(true);
  }, 60_000);
});

/** The top-level folders of this repository a doc may name a file in. */
const FOLDERS = [
  "functions",
  "infra",
  "test",
  "bench",
  "scripts",
  "local",
  "migrations",
  "docs",
  "cli",
  "dist",
  ".github",
];

/** Files the docs name in code spans (`infra/relayTiming.ts`) and documents named in prose (DESIGN.md) that do not exist. */
function missingFiles(doc: string): string[] {
  const text = read(doc);
  const inCode = [
    ...text.matchAll(new RegExp(`\`((?:${FOLDERS.join("|").replace(".", "\\.")})/[^\`\\s]*)\``, "g")),
  ]
    .map((match) => (match[1] ?? "").replace(/[:#].*$/, ""))
    // A pattern or a placeholder (`migrations/*.sql`, `dist/lambda/<name>/`) names no one file.
    .filter((path) => !/[*<>{}|]/.test(path));
  const documents = [...text.replace(/`[^`\n]*`/g, "").matchAll(/(?<![\w/.-])([A-Z][A-Z_]*\.md)\b/g)].map(
    (match) => match[1] ?? "",
  );
  return [...new Set([...inCode, ...documents])].filter((path) => !existsSync(join(REPOSITORY, path)));
}

describe("files the docs name", () => {
  it.each(DOCS)("%s: every repository file it names exists", (doc) => {
    expect(missingFiles(doc)).toEqual([]);
  });

  it("the check sees a missing file and a missing document", () => {
    expect(statSync(join(REPOSITORY, "infra", "relayTiming.ts")).isFile()).toBe(true);
    expect(existsSync(join(REPOSITORY, "DESIGN.md"))).toBe(false);
    expect(missingFiles("docs/deploy.md")).not.toContain("infra/relayTiming.ts");
  });
});
