import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The documentation as a reader meets it: README.md (also the package page), CONTRIBUTING.md and docs/*.md. Their links resolve,
 * their TypeScript blocks compile against the built package, and docs/api.md lists exactly what the package exports.
 */

const REPOSITORY = realpathSync(new URL("../..", import.meta.url));
const pkg = JSON.parse(readFileSync(join(REPOSITORY, "package.json"), "utf8")) as {
  name: string;
  files: string[];
  exports: Record<string, string | { types?: string }>;
};
const REPOSITORY_URL = "https://github.com/aws-outbox-relay/aws-outbox-relay";
const DOCS = [
  "README.md",
  "CONTRIBUTING.md",
  ...readdirSync(join(REPOSITORY, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];
const read = (path: string) => readFileSync(join(REPOSITORY, path), "utf8");

interface Block {
  doc: string;
  /** 1-based line of the block's first code line in the document. */
  line: number;
  language: string;
  marker: string;
  code: string;
}

/** Fenced blocks, indented ones (inside list items) included; the indentation is removed from the code. */
function codeBlocks(doc: string): Block[] {
  const blocks: Block[] = [];
  const lines = read(doc).split("\n");
  for (let index = 0; index < lines.length; index++) {
    const open = /^(\s*)```(\S*)[ \t]*(.*)$/.exec(lines[index] ?? "");
    if (open === null) continue;
    const [, indent = "", language = "", marker = ""] = open;
    const start = index + 1;
    index = start;
    while (index < lines.length && (lines[index] ?? "").trim() !== "```") index++;
    const code = lines
      .slice(start, index)
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join("\n");
    blocks.push({ doc, line: start + 1, language, marker: marker.trim(), code });
  }
  return blocks;
}

/** GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  const withoutCode = markdown.replace(/^\s*```[\s\S]*?^\s*```/gm, "");
  for (const [, text = ""] of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = text
      .replace(/<[^>]+>/g, "")
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

function links(doc: string): string[] {
  const withoutCode = read(doc)
    .replace(/^\s*```[\s\S]*?^\s*```/gm, "")
    .replace(/`[^`\n]*`/g, "");
  return [...withoutCode.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] ?? "");
}

/** Files `npm pack` ships at the root besides package.json "files" (npm always includes these). */
const ALWAYS_SHIPPED = ["package.json", "LICENSE"];
const shipped = (path: string) =>
  ALWAYS_SHIPPED.includes(path) || pkg.files.some((entry) => path === entry || path.startsWith(`${entry}/`));

/** Why a link does not work where its document is read, or undefined when it does. */
function brokenLink(doc: string, target: string): string | undefined {
  const [path = "", anchor] = target.split("#") as [string, string | undefined];
  let file: string;
  if (path.startsWith(`${REPOSITORY_URL}/`)) {
    const inTree = /^\/(?:blob|tree)\/main\/(.+)$/.exec(path.slice(REPOSITORY_URL.length));
    if (inTree === null) return "a repository link that is not /blob/main/<path> or /tree/main/<path>";
    file = inTree[1] ?? "";
  } else if (/^[a-z]+:/.test(path)) {
    return undefined; // another site: not ours to check offline
  } else if (path === "") {
    file = doc;
  } else {
    file = relative(REPOSITORY, resolve(REPOSITORY, dirname(doc), path));
    // README.md is also the npm package page, where only what the tarball holds can be linked relatively.
    if (doc === "README.md" && !shipped(file))
      return `${file} is not in the package: link ${REPOSITORY_URL}/blob/main/${file}`;
  }
  if (!existsSync(join(REPOSITORY, file))) return `${file} does not exist`;
  if (anchor !== undefined && file.endsWith(".md") && !anchors(read(file)).has(anchor)) {
    return `${file} has no heading #${anchor}`;
  }
  return undefined;
}

describe("links in README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md", () => {
  it.each([...DOCS, "CHANGELOG.md"])(
    "%s: every link resolves (relative targets exist, README's are shipped; repository links name files in the tree; anchors are headings)",
    (doc) => {
      const broken = links(doc).flatMap((target) => {
        const why = brokenLink(doc, target);
        return why === undefined ? [] : [`${target}: ${why}`];
      });
      expect(broken).toEqual([]);
    },
  );

  it("the checker refuses what it must: an unshipped relative README link, a missing file, a missing anchor", () => {
    expect(brokenLink("README.md", "docs/api.md")).toMatch(/not in the package/);
    expect(brokenLink("README.md", `${REPOSITORY_URL}/blob/main/docs/nope.md`)).toMatch(/does not exist/);
    expect(brokenLink("docs/api.md", "deploy.md#no-such-heading")).toMatch(/no heading/);
    expect(brokenLink("README.md", `${REPOSITORY_URL}/blob/main/docs/api.md`)).toBeUndefined();
    expect(brokenLink("README.md", "CHANGELOG.md")).toBeUndefined();
  });
});

/** The package's entry points as a user imports them ("aws-outbox-relay/db"), with the declarations behind each. */
const ENTRY_POINTS = Object.entries(pkg.exports).flatMap(([subpath, target]) => {
  const types = typeof target === "string" ? undefined : target.types;
  if (types === undefined) return []; // package.json, the .sql files
  return [{ specifier: `${pkg.name}${subpath.slice(1)}`, declarations: join(REPOSITORY, types) }];
});

/**
 * Blocks that are fragments on purpose (a prop's shape, a line of a larger program) say so in their fence:
 * "```ts fragment". Every other ts block must compile as a module of a user's app. A block whose fence names a
 * file ("```ts billing.ts") is that file of its document's example, so the document's other blocks may import it
 * ("./billing.ts"); README's are one app that test/package/readme.test.ts also runs.
 */
const FRAGMENT = "fragment";
const TYPESCRIPT = new Set(["ts", "typescript"]);
const blocks = DOCS.flatMap(codeBlocks).filter((block) => TYPESCRIPT.has(block.language));
const fragments = blocks.filter((block) => block.marker === FRAGMENT);
const checked = blocks.filter((block) => block.marker !== FRAGMENT);
const scratch = realpathSync(mkdtempSync(join(tmpdir(), "outbox-doc-blocks-")));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * One TypeScript program (a few seconds of aws-cdk-lib's declarations, paid once) over a user's app holding every
 * checked block, one file each, and the package's built entry points, whose exports docs/api.md must list.
 */
let program: { program: ts.Program; files: Map<string, Block> } | undefined;
function docsProgram() {
  if (program !== undefined) return program;
  if (!existsSync(join(REPOSITORY, "dist", "functions", "shared", "index.d.ts"))) {
    throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
  }
  // A user's app: its own package.json (ESM), and node_modules holding this repository's dependencies plus the
  // package itself, which resolves through its "exports" to the built declarations.
  writeFileSync(join(scratch, "package.json"), JSON.stringify({ name: "docs-app", type: "module" }));
  const modules = join(scratch, "node_modules");
  mkdirSync(modules);
  for (const name of readdirSync(join(REPOSITORY, "node_modules"))) {
    if (name !== pkg.name && !name.startsWith(".")) {
      symlinkSync(join(REPOSITORY, "node_modules", name), join(modules, name));
    }
  }
  symlinkSync(REPOSITORY, join(modules, pkg.name));
  // `export {}` makes each block a module of its own, so blocks do not share names.
  const files = new Map<string, Block>();
  for (const block of checked) {
    const named = block.marker.endsWith(".ts");
    const folder = join(scratch, block.doc.replace(/\W/g, "_"));
    mkdirSync(folder, { recursive: true });
    const file = named ? join(folder, block.marker) : join(folder, `${block.line}.ts`);
    writeFileSync(file, `${block.code}\nexport {};\n`);
    files.set(file, block);
  }
  program = {
    program: ts.createProgram([...files.keys(), ...ENTRY_POINTS.map((entry) => entry.declarations)], {
      target: ts.ScriptTarget.ES2024,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      allowImportingTsExtensions: true,
      types: ["node"],
    }),
    files,
  };
  return program;
}

describe("TypeScript blocks in README.md, CONTRIBUTING.md and docs/*.md", () => {
  it(`compile against the built package (strict, nodenext); ${fragments.length} marked "${FRAGMENT}" (parts of a larger program on purpose, each explained beside it) are left out: ${fragments.map((block) => `${block.doc}:${block.line}`).join(", ")}`, () => {
    expect(checked.length).toBeGreaterThan(5);
    // A few fragments on purpose, not a way around the check.
    expect(fragments.length).toBeLessThanOrEqual(5);
    const { program: docs, files } = docsProgram();
    const problems = [...files.keys()].flatMap((fileName) => {
      const file = docs.getSourceFile(fileName);
      const block = files.get(fileName);
      if (file === undefined || block === undefined) return [`${fileName}: not in the program`];
      return ts.getPreEmitDiagnostics(docs, file).map((diagnostic) => {
        const { line } = file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
        return `${block.doc}:${block.line + line}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`;
      });
    });
    expect(problems).toEqual([]);
  }, 180_000);
});

/** Each entry point's export names, as the compiler reads them from the built declarations. */
function exportsOf(): Map<string, string[]> {
  const { program: docs } = docsProgram();
  const checker = docs.getTypeChecker();
  return new Map(
    ENTRY_POINTS.map((entry) => {
      const file = docs.getSourceFile(entry.declarations);
      const module = file === undefined ? undefined : checker.getSymbolAtLocation(file);
      if (module === undefined) throw new Error(`${entry.declarations}: not a module the compiler can read`);
      return [
        entry.specifier,
        checker
          .getExportsOfModule(module)
          .map((symbol) => symbol.name)
          .sort(),
      ];
    }),
  );
}

/**
 * docs/api.md: one "## `<specifier>`" section per entry point, one list item per export whose code span starts
 * with its kind and name ("- `function enqueue(…)`: …").
 */
function documentedExports(markdown: string): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of markdown.split("\n")) {
    const heading = /^## `([^`]+)`/.exec(line);
    if (heading !== null) {
      current = [];
      sections.set(heading[1] ?? "", current);
      continue;
    }
    if (line.startsWith("## ")) current = undefined;
    const item = /^- `(?:function|class|interface|type|const) ([A-Za-z_$][\w$]*)/.exec(line);
    if (item !== null && current !== undefined) current.push(item[1] ?? "");
  }
  for (const names of sections.values()) names.sort();
  return sections;
}

describe("docs/api.md", () => {
  it("lists every export of every entry point, and nothing that is not exported", () => {
    const exported = exportsOf();
    expect([...exported.keys()]).toContain(pkg.name);
    expect([...exported.values()].flat().length).toBeGreaterThan(50);
    expect(Object.fromEntries(documentedExports(read("docs/api.md")))).toEqual(Object.fromEntries(exported));
  }, 180_000);

  it("the comparison sees an export left out", () => {
    const api = read("docs/api.md");
    const without = api.replace(/^- `function enqueue\b.*$/m, "");
    expect(without).not.toBe(api);
    expect(documentedExports(api).get(pkg.name)).toContain("enqueue");
    expect(documentedExports(without).get(pkg.name)).not.toContain("enqueue");
  });
});
