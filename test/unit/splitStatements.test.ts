import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { splitStatements } from "../../functions/shared/db/migrate.ts";

const MIGRATIONS = new URL("../../migrations/", import.meta.url);

describe("a no-transaction migration's statements", () => {
  it("split at a ; that ends a line", () => {
    expect(splitStatements("create index a;\n-- why\ncreate index b;\n")).toEqual([
      "create index a",
      "-- why\ncreate index b",
    ]);
  });

  it("keep a DO block whole, whatever its body's ; and quotes", () => {
    const block =
      "do $m$\nbegin\n  execute format($f$ select %L; $f$, 'it''s;');\n  revoke all on t from public;\nend;\n$m$";
    expect(splitStatements(`${block};\ncreate index c;\n`)).toEqual([block, "create index c"]);
  });

  it("ignore ; and quotes in comments, and a $ inside a word", () => {
    expect(splitStatements("-- don't; $x$\nselect a$b;\n/* ;\n */select 2;\n")).toEqual([
      "-- don't; $x$\nselect a$b",
      "/* ;\n */select 2",
    ]);
  });

  it("split the shipped no-transaction files as the line rule did", () => {
    for (const file of readdirSync(MIGRATIONS).filter((name) => name.endsWith(".sql"))) {
      const sql = readFileSync(new URL(file, MIGRATIONS), "utf8");
      if (!/^--\s*migrate:\s*no-transaction\s*$/m.test(sql) || sql.includes("$migration$")) continue;
      const byLine = sql
        .split(/;[ \t]*(?:\r?\n|$)/)
        .filter((statement) => statement.replace(/--[^\n]*/g, "").trim() !== "");
      expect(splitStatements(sql), file).toEqual(byLine);
    }
  });
});
