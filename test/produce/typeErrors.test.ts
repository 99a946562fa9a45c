import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * What tsc says for a handle that is not a transaction's (issue 38). types.ts marks each refused line with
 * `// @ts-expect-error <what> is not a transaction`; typecheck proves only that some error is there. Here the same
 * file is compiled with those comments taken out, and each refused line must be reported with the sentence
 * `enqueue`'s parameter type carries (transactionHandle.ts NotATransaction): its subject, then "pass the
 * transaction your library gives you". Each accepted line must compile as it is.
 */
const TYPES = fileURLToPath(new URL("./types.ts", import.meta.url));
const EXPECT = /^\s*\/\/ @ts-expect-error (.+ is not a transaction)$/;

interface Refused {
  line: number;
  subject: string;
}

function compileWithoutExpectations(): { refused: Refused[]; diagnostics: Map<number, string[]> } {
  const source = readFileSync(TYPES, "utf8").split("\n");
  const refused: Refused[] = [];
  const stripped = source.map((text, index) => {
    const match = EXPECT.exec(text);
    if (match === null) return text;
    refused.push({ line: index + 1, subject: match[1] as string });
    return "";
  });
  const config = ts.getParsedCommandLineOfConfigFile(
    fileURLToPath(new URL("../../tsconfig.json", import.meta.url)),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
  );
  if (config === undefined) throw new Error("tsconfig.json did not parse");
  const host = ts.createCompilerHost(config.options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === TYPES
      ? ts.createSourceFile(name, stripped.join("\n"), language)
      : getSourceFile(name, language, ...rest);
  const program = ts.createProgram([TYPES], config.options, host);
  const file = program.getSourceFile(TYPES);
  if (file === undefined) throw new Error("types.ts is not in the program");
  const diagnostics = new Map<number, string[]>();
  for (const diagnostic of ts.getPreEmitDiagnostics(program, file)) {
    const line = file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1;
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
    diagnostics.set(line, [...(diagnostics.get(line) ?? []), text]);
  }
  return { refused, diagnostics };
}

describe("enqueue's type errors for a handle that is not a transaction", () => {
  const { refused, diagnostics } = compileWithoutExpectations();

  it("covers the refused handles of every library in types.ts", () => {
    expect(refused.map((entry) => entry.subject)).toEqual(
      expect.arrayContaining([
        "a pg.Pool is not a transaction",
        "the root postgres.js sql is not a transaction",
        "Drizzle's root db is not a transaction",
        "a root Kysely is not a transaction",
        "a Prisma client is not a transaction",
        "a root knex is not a transaction",
        "a TypeORM DataSource is not a transaction",
      ]),
    );
  });

  it("each says what it got and to pass the transaction the library gives", () => {
    const reported = refused.map(({ line, subject }) => {
      const texts = diagnostics.get(line + 1) ?? [];
      return {
        line: line + 1,
        says: texts.some((text) =>
          text.includes(`"${subject}: pass the transaction your library gives you (`),
        ),
        texts,
      };
    });
    expect(reported.filter((entry) => !entry.says)).toEqual([]);
  });

  it("names no unrelated library's handle type (what tsc said before)", () => {
    const texts = [...diagnostics.values()].flat().join("\n");
    expect(texts).not.toMatch(/TypeOrmEntityManagerHandle|isTransactionActive|PostgresJsTransactionHandle/);
  });

  it("accepts every transaction handle as it is", () => {
    const refusedLines = new Set(refused.map(({ line }) => line + 1));
    const others = [...diagnostics].filter(([line]) => !refusedLines.has(line));
    expect(others).toEqual([]);
  });
});
