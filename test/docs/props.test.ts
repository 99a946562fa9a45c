import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { codeSpans, REPOSITORY, read, tableUnder } from "./markdown.ts";

/**
 * docs/api.md and deploy.md's props table against the built declarations (`npm run build` makes dist/): every
 * property of every documented interface and class, nested object types included, is listed, with its `?`; every
 * prop of the construct, down to `relay.batchSize` and `largePayloads.maxPayloadBytes`, has a row in deploy.md.
 * A prop added to the code fails here naming the page and the line to write.
 */

const pkg = JSON.parse(read("package.json")) as {
  name: string;
  exports: Record<string, string | { types?: string }>;
};
const DIST = join(REPOSITORY, "dist");
const ENTRY_POINTS = Object.entries(pkg.exports).flatMap(([subpath, target]) => {
  const types = typeof target === "string" ? undefined : target.types;
  return types === undefined
    ? []
    : [{ specifier: `${pkg.name}${subpath.slice(1)}`, file: join(REPOSITORY, types) }];
});

/**
 * One program over the entry points' declarations, paid once per file (aws-cdk-lib's declarations take most of
 * it: ~15 s here, minutes on a loaded machine, hence the tests' 5-minute timeouts).
 */
let compiled: { program: ts.Program; checker: ts.TypeChecker } | undefined;
function declarations() {
  if (compiled !== undefined) return compiled;
  if (!existsSync(join(DIST, "infra", "index.d.ts")))
    throw new Error("dist/ is missing: run `npm run build` first");
  const program = ts.createProgram(
    ENTRY_POINTS.map((entry) => entry.file),
    {
      target: ts.ScriptTarget.ES2024,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ["node"],
    },
  );
  compiled = { program, checker: program.getTypeChecker() };
  return compiled;
}

const ours = (declaration: ts.Declaration) => declaration.getSourceFile().fileName.startsWith(DIST);

/** An exported symbol of an entry point, aliases resolved. */
function exported(specifier: string, name: string): ts.Symbol | undefined {
  const { program, checker } = declarations();
  const entry = ENTRY_POINTS.find((item) => item.specifier === specifier);
  const file = entry === undefined ? undefined : program.getSourceFile(entry.file);
  const module = file === undefined ? undefined : checker.getSymbolAtLocation(file);
  if (module === undefined) return undefined;
  const symbol = checker.getExportsOfModule(module).find((item) => item.name === name);
  if (symbol === undefined) return undefined;
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

/** A member as api.md writes it: its name, `?` when optional, and the members of an inline object type. */
interface Member {
  name: string;
  optional: boolean;
  members?: Member[];
}

const label = (member: Member): string =>
  `${member.name}${member.optional ? "?" : ""}${member.members === undefined ? "" : `: { ${member.members.map(label).join("; ")} }`}`;

/** The members of a type as the declarations hold them: ours only (not Construct's `node`, not Error's `stack`). */
function membersOfType(
  type: ts.Type,
  own: (declaration: ts.Declaration) => boolean,
  nested: boolean,
): Member[] {
  const { checker } = declarations();
  return (
    checker
      .getPropertiesOfType(type)
      .filter((property) => (property.declarations ?? []).some(own))
      .filter((property) => !property.name.startsWith("__#") && !property.name.startsWith("#"))
      // An error class's `name` is its class name, which the item already says.
      .filter(
        (property) =>
          !(
            property.name === "name" &&
            (property.flags & ts.SymbolFlags.Property) !== 0 &&
            isErrorClass(type)
          ),
      )
      .map((property) => {
        const declaration = property.valueDeclaration ?? property.declarations?.[0];
        const optional = (property.flags & ts.SymbolFlags.Optional) !== 0;
        const propertyType = checker.getNonNullableType(checker.getTypeOfSymbol(property));
        // An inline object type (`match: { aggregateType?; eventType? }`) is listed member by member.
        const literal =
          declaration !== undefined &&
          ts.isPropertySignature(declaration) &&
          declaration.type !== undefined &&
          ts.isTypeLiteralNode(declaration.type);
        return {
          name: property.name,
          optional,
          ...(literal && nested ? { members: membersOfType(propertyType, ours, nested) } : {}),
        };
      })
  );
}

function isErrorClass(type: ts.Type): boolean {
  const { checker } = declarations();
  return checker.getPropertiesOfType(type).some((property) => property.name === "stack");
}

/**
 * What an exported interface or class holds: an interface's properties (inherited ones of ours included), a
 * class's own. `nested`: inline object types member by member (the construct's props, where every option counts).
 */
function membersOf(symbol: ts.Symbol, nested: boolean): Member[] {
  const { checker } = declarations();
  const type = checker.getDeclaredTypeOfSymbol(symbol);
  if (symbol.flags & ts.SymbolFlags.Class) {
    const declaration = symbol.declarations?.[0];
    return membersOfType(type, (item) => item.parent === declaration, nested);
  }
  return membersOfType(type, ours, nested);
}

/** The construct's entry point: its props are checked down to every nested option. */
const CDK = `${pkg.name}/cdk`;

/** "{ a; b?; c: { d? }; constructor(x: X) }" -> members (the constructor is the class's signature, not a member). */
function parseMembers(text: string): Member[] {
  const members: Member[] = [];
  let depth = 0;
  let current = "";
  const flush = () => {
    const item = current.trim();
    current = "";
    if (item === "") return;
    const match = /^([~$\w]+)(\?)?(?:\([^)]*\))?(?::\s*\{([\s\S]*)\})?/.exec(item);
    if (match === null || match[1] === "constructor") return;
    members.push({
      name: match[1] ?? "",
      optional: match[2] === "?",
      ...(match[3] === undefined ? {} : { members: parseMembers(match[3]) }),
    });
  };
  for (const char of text) {
    if (char === "{" || char === "(") depth++;
    if (char === "}" || char === ")") depth--;
    if (char === ";" && depth === 0) flush();
    else current += char;
  }
  flush();
  return members;
}

interface Item {
  specifier: string;
  kind: "interface" | "class";
  name: string;
  members: Member[];
  line: number;
}

/** api.md's interface and class items, per entry point section: "- `interface Name<T> extends X { a; b? }`: ...". */
function documentedItems(markdown: string): Item[] {
  const items: Item[] = [];
  let specifier: string | undefined;
  markdown.split("\n").forEach((line, index) => {
    const heading = /^## `([^`]+)`/.exec(line);
    if (heading !== null) specifier = heading[1];
    else if (line.startsWith("## ")) specifier = undefined;
    const item = /^- `(interface|class) ([A-Za-z_$][\w$]*)[^`{]*?(?:\{(.*)\})?`/.exec(line);
    if (item === null || specifier === undefined) return;
    items.push({
      specifier,
      kind: item[1] as Item["kind"],
      name: item[2] ?? "",
      members: parseMembers(item[3] ?? ""),
      line: index + 1,
    });
  });
  return items;
}

/** Where api.md's item and the declarations disagree, one line each. */
function apiDrift(markdown: string): string[] {
  return documentedItems(markdown).flatMap((item) => {
    const symbol = exported(item.specifier, item.name);
    if (symbol === undefined) return [`docs/api.md:${item.line}: ${item.specifier} exports no ${item.name}`];
    const nested = item.specifier === CDK;
    const actual = membersOf(symbol, nested).map(label).sort();
    const written = item.members
      .map((member) => (nested ? member : { ...member, members: undefined }))
      .map(label)
      .sort();
    const missing = actual.filter((member) => !written.includes(member));
    const stale = written.filter((member) => !actual.includes(member));
    return [
      ...(missing.length === 0 ? [] : [`docs/api.md:${item.line}: ${item.name} lacks ${missing.join("; ")}`]),
      ...(stale.length === 0 ? [] : [`docs/api.md:${item.line}: ${item.name} has no ${stale.join("; ")}`]),
    ];
  });
}

/**
 * Named object types of ours that a documented item's properties use (`largePayloads?: LargePayloadsProps`): each
 * must be an export api.md documents too, so a nested prop is never out of sight.
 */
function undocumentedNestedTypes(markdown: string): string[] {
  const { checker } = declarations();
  const documented = new Set(documentedItems(markdown).map((item) => item.name));
  const problems = new Set<string>();
  const visit = (type: ts.Type, where: string) => {
    if (type.isUnion()) {
      for (const member of type.types) visit(member, where);
      return;
    }
    if (checker.isArrayType(type) || checker.isTupleType(type)) {
      for (const argument of checker.getTypeArguments(type as ts.TypeReference)) visit(argument, where);
      return;
    }
    // Omit<OutboxConsumerProps, ...>, Partial<...>: the type they are made of.
    if (type.aliasSymbol !== undefined && !(type.aliasSymbol.declarations ?? []).some(ours)) {
      for (const argument of type.aliasTypeArguments ?? []) visit(argument, where);
      return;
    }
    const symbol = type.aliasSymbol ?? type.getSymbol();
    const declaration = symbol?.declarations?.[0];
    if (symbol === undefined || declaration === undefined || !ours(declaration)) return;
    if (!(ts.isInterfaceDeclaration(declaration) || ts.isClassDeclaration(declaration))) return;
    if (!documented.has(symbol.name))
      problems.add(`${where} is a ${symbol.name}, which docs/api.md does not list: export and document it`);
  };
  for (const item of documentedItems(markdown).filter((entry) => entry.specifier === CDK)) {
    const symbol = exported(item.specifier, item.name);
    if (symbol === undefined) continue;
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    for (const property of checker.getPropertiesOfType(type)) {
      if (!(property.declarations ?? []).some(ours)) continue;
      visit(checker.getNonNullableType(checker.getTypeOfSymbol(property)), `${item.name}.${property.name}`);
    }
  }
  return [...problems];
}

describe("docs/api.md against the built declarations", () => {
  it("lists every property of every interface and class it documents, with its ?, and none that is gone", () => {
    expect(apiDrift(read("docs/api.md"))).toEqual([]);
  }, 300_000);

  it("documents every named type a property of the construct's documented types uses", () => {
    expect(undocumentedNestedTypes(read("docs/api.md"))).toEqual([]);
  }, 300_000);

  it("the comparison sees a property left out, a stale one and a lost ?", () => {
    const api = read("docs/api.md");
    const edited = api
      .replace("{ mode?; batchSize?;", "{ mode?; ")
      .replace("interface OutboxPurgeProps { schedule?;", "interface OutboxPurgeProps { schedule?; turbo?;")
      .replace("interface EnqueuedEvent { id; seq }", "interface EnqueuedEvent { id?; seq }");
    const problems = apiDrift(edited);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/OutboxRelayTuning lacks batchSize\?$/),
        expect.stringMatching(/EnqueuedEvent lacks id$/),
        expect.stringMatching(/EnqueuedEvent has no id\?$/),
        expect.stringMatching(/OutboxPurgeProps has no turbo\?$/),
      ]),
    );
    expect(problems).toHaveLength(4);
  }, 300_000);
});

/** The construct's props as paths: into the interfaces of ours a prop is exactly (`relay.batchSize`), else the prop. */
function propPaths(): string[] {
  const { checker } = declarations();
  const props = exported(`${pkg.name}/cdk`, "OutboxRelayProps");
  if (props === undefined) throw new Error("aws-outbox-relay/cdk exports no OutboxRelayProps");
  const walk = (type: ts.Type, prefix: string): string[] =>
    checker.getPropertiesOfType(type).flatMap((property) => {
      const path = `${prefix}${property.name}`;
      const inner = checker.getNonNullableType(checker.getTypeOfSymbol(property));
      const declaration = inner.aliasSymbol === undefined ? inner.getSymbol()?.declarations?.[0] : undefined;
      const nested =
        !inner.isUnion() &&
        declaration !== undefined &&
        ours(declaration) &&
        ts.isInterfaceDeclaration(declaration);
      return nested ? walk(inner, `${path}.`) : [path];
    });
  return walk(checker.getDeclaredTypeOfSymbol(props), "");
}

/**
 * The props a table row documents: `relay.batchSize`, `concurrency` (a bare name after a dotted one shares its
 * prefix), `database.vpc`, `database.vpcSubnets`.
 */
function documentedProps(cell: string): string[] {
  let prefix = "";
  return codeSpans(cell).map((span) => {
    const dot = span.lastIndexOf(".");
    if (dot !== -1) {
      prefix = span.slice(0, dot + 1);
      return span;
    }
    return `${prefix}${span}`;
  });
}

function deployDrift(rows: string[][]): string[] {
  const documented = new Set(rows.flatMap(([cell = ""]) => documentedProps(cell)));
  const paths = propPaths();
  return [
    ...paths
      .filter((path) => !documented.has(path))
      .map((path) => `docs/deploy.md's props table lacks ${path}`),
    ...[...documented]
      .filter((path) => !paths.includes(path))
      .map((path) => `docs/deploy.md's props table documents ${path}, which OutboxRelayProps does not have`),
  ];
}

describe("docs/deploy.md's props table against OutboxRelayProps", () => {
  const table = tableUnder("docs/deploy.md", "Props");

  it("has a row for every prop, nested ones included, and none for a prop that is gone", () => {
    expect(propPaths()).toEqual(expect.arrayContaining(["database.vpc", "relay.batchSize", "alarms.topic"]));
    expect(deployDrift(table.rows)).toEqual([]);
  }, 300_000);

  it("the comparison sees a missing row and a stale one", () => {
    const rows = table.rows.filter(([cell = ""]) => !cell.includes("`purge.batchSize`"));
    expect(deployDrift([...rows, ["`relay.turbo`", "", ""]])).toEqual([
      "docs/deploy.md's props table lacks purge.batchSize",
      "docs/deploy.md's props table documents relay.turbo, which OutboxRelayProps does not have",
    ]);
  }, 300_000);
});

/** The members deploy.md's "Exposed:" paragraph names (`queue`, `metric(name, ...)`: the identifier each span starts with). */
function exposedDrift(deploy: string): string[] {
  const paragraph = /^Exposed: [\s\S]*?(?=\n\n)/m.exec(deploy)?.[0] ?? "";
  const named = new Set(codeSpans(paragraph).map((span) => /^[A-Za-z_$][\w$]*/.exec(span)?.[0] ?? ""));
  const symbol = exported(CDK, "OutboxRelay");
  if (symbol === undefined) return ["aws-outbox-relay/cdk exports no OutboxRelay"];
  return membersOf(symbol, false)
    .map((member) => member.name)
    .filter((name) => !named.has(name))
    .map((name) => `docs/deploy.md's "Exposed:" paragraph lacks OutboxRelay's ${name}`);
}

describe("docs/deploy.md's list of what OutboxRelay exposes", () => {
  it("names every public member of the construct", () => {
    expect(exposedDrift(read("docs/deploy.md"))).toEqual([]);
  }, 300_000);

  it("the comparison sees a member left out", () => {
    const deploy = read("docs/deploy.md").replace("`relayFunction`, ", "");
    expect(exposedDrift(deploy)).toEqual([
      `docs/deploy.md's "Exposed:" paragraph lacks OutboxRelay's relayFunction`,
    ]);
  }, 300_000);
});

// Keeps the reader's file list honest: the declarations read here are the ones the package ships.
it("reads the declarations the package's exports name", () => {
  for (const entry of ENTRY_POINTS)
    expect(readFileSync(entry.file, "utf8").length, entry.specifier).toBeGreaterThan(0);
});
