import { readFile, writeFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { useTestDatabase } from "../support/db.ts";
import { outboxRoles } from "../support/roles.ts";
import { dumpSchema } from "../support/schemaDump.ts";

const db = useTestDatabase();
const DUMP = new URL("./schema.sql", import.meta.url);

describe("schema", () => {
  // A migration that changes the schema must come with a reviewed update of test/db/schema.sql:
  // run `UPDATE_SCHEMA_DUMP=1 npx vitest run test/db/schema.test.ts` and commit the diff.
  it("matches the committed dump", async () => {
    // The outbox's schema, then its private schema (migration 0016), where the definer code and what it reads live.
    const privateSchema = outboxNames().privateSchema;
    const dump = `${await dumpSchema(db.pool)}\n-- schema ${privateSchema}\n${await dumpSchema(db.pool, privateSchema)}`;
    // The outbox's roles by job: their names carry the database and, in a clone, a random suffix (0018).
    const roles = await outboxRoles(db.pool);
    const actual = dump
      .replaceAll(roles.relay, "<outbox relay role>")
      .replaceAll(roles.purge, "<outbox purge role>");
    if (process.env.UPDATE_SCHEMA_DUMP === "1") await writeFile(DUMP, actual);
    const committed = await readFile(DUMP, "utf8").catch(() => "(test/db/schema.sql is missing)");
    expect(actual).toBe(committed);
  });
});
