import { describe, expect, inject, it } from "vitest";
import { migrate, refuseUnsupportedServer, SUPPORTED_POSTGRES } from "../../functions/shared/db/migrate.ts";
import { MigrationError } from "../../functions/shared/outbox/errors.ts";
import { POSTGRES_VERSIONS } from "../../local/backends/docker.ts";
import { useEmptyDatabases } from "../support/db.ts";

const { emptyPool } = useEmptyDatabases();

describe("the Postgres majors the migrations accept", () => {
  it("names the same majors the test matrix runs", () => {
    expect(SUPPORTED_POSTGRES.map(String)).toEqual([...POSTGRES_VERSIONS]);
  });

  it("refuses a server older than 14, naming its version and the supported ones, before applying anything", () => {
    expect(() => refuseUnsupportedServer(130018, "13.18")).toThrow(MigrationError);
    expect(() => refuseUnsupportedServer(130018, "13.18")).toThrow(
      "Postgres 13.18 is not supported: the outbox is tested on Postgres 14, 15, 16 and 17 (docs/database.md, Supported " +
        "Postgres versions); upgrade the database first",
    );
    expect(() => refuseUnsupportedServer(140000, "14.0")).not.toThrow();
    // A newer major than the matrix is let through: it is the upgrade path, and the matrix grows with AWS's list.
    expect(() => refuseUnsupportedServer(180004, "18.4")).not.toThrow();
  });

  it(`accepts the harness's server (${inject("pgVersion")}) and applies every file`, async () => {
    const pool = await emptyPool();
    const result = await migrate(pool);
    expect(result.applied.length).toBeGreaterThan(0);
  });
});
