/**
 * The data libraries `enqueue` takes a transaction of, and the oldest release of each that the package supports:
 * package.json's peer ranges start at these versions (test/package/install.test.ts checks it), and
 * `npm run test:libraries` installs each library at its oldest and at its newest release (the registry's `latest`)
 * beside the packed package and runs that library's test file against it (vitest.libraries.config.ts).
 *
 * A library comes with the packages a service installs together with it: `prisma` (the CLI that generates the
 * client), MikroORM's driver package, and postgres.js for Drizzle's second driver.
 */
export interface Library {
  /** As the library calls itself. */
  name: string;
  /** Its test file in this folder. */
  test: string;
  /** Every package of it at its oldest supported release, exactly. */
  oldest: Record<string, string>;
  /** The packages that are peer dependencies of aws-outbox-relay (the others are the service's own). */
  peers: string[];
}

export const LIBRARIES: readonly Library[] = [
  { name: "Kysely", test: "kysely.test.ts", oldest: { kysely: "0.27.0" }, peers: ["kysely"] },
  {
    name: "Drizzle",
    test: "drizzle.test.ts",
    oldest: { "drizzle-orm": "0.36.0", postgres: "3.3.0" },
    peers: ["drizzle-orm"],
  },
  {
    // 6.16 is Prisma 6's first release whose client runs without a native query engine (`engineType = "client"`
    // with a driver adapter); an older client needs that engine, which its install script downloads.
    name: "Prisma",
    test: "prisma.test.ts",
    oldest: { "@prisma/client": "6.16.0", "@prisma/adapter-pg": "6.16.0", prisma: "6.16.0" },
    peers: ["@prisma/client", "@prisma/adapter-pg"],
  },
  { name: "TypeORM", test: "typeorm.test.ts", oldest: { typeorm: "0.3.0" }, peers: ["typeorm"] },
  {
    // @mikro-orm/postgresql 6.0.0 was published with a peer range of MikroORM 5: 6.0.2 is the first that installs.
    name: "MikroORM",
    test: "mikroorm.test.ts",
    oldest: { "@mikro-orm/core": "6.0.2", "@mikro-orm/postgresql": "6.0.2" },
    peers: ["@mikro-orm/core"],
  },
  { name: "postgres.js", test: "postgresjs.test.ts", oldest: { postgres: "3.3.0" }, peers: ["postgres"] },
  // Knex 3.0.0 was published without lib/dialects/index.js ("Cannot find module '../../dialects'"): 3.0.1 fixed it.
  { name: "Knex", test: "knex.test.ts", oldest: { knex: "3.0.1" }, peers: ["knex"] },
];

/** `name@version` of every package of `libraries`, at their oldest releases or at the registry's newest. */
export function packageSpecs(libraries: readonly Library[], at: "oldest" | "newest"): string[] {
  const specs = new Map<string, string>();
  for (const library of libraries) {
    for (const [name, version] of Object.entries(library.oldest)) {
      specs.set(name, `${name}@${at === "oldest" ? version : "latest"}`);
    }
  }
  return [...specs.values()];
}
