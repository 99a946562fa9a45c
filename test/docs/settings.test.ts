import { describe, expect, it } from "vitest";
import { DATABASE_SETTINGS } from "../../functions/shared/db/settings.ts";
import { CLAIM_CHECK_SETTINGS } from "../../functions/shared/destinations/claimCheck/settings.ts";
import { DESTINATION_SETTINGS } from "../../functions/shared/destinations/setting.ts";
import { METRICS_SETTINGS } from "../../functions/shared/observe/settings.ts";
import { OUTBOX_LOCATION_SETTINGS } from "../../functions/shared/outbox/names.ts";
import { PURGE_SETTINGS } from "../../functions/shared/purge/settings.ts";
import { RELAY_SETTINGS } from "../../functions/shared/relay/settings.ts";
import type { Setting, SettingsTable } from "../../functions/shared/util/settings.ts";
import { codeSpans, type Table, tableUnder } from "./markdown.ts";

/**
 * The environment tables of the docs against the settings tables the Lambdas read (functions/shared/**\/settings.ts):
 * every row a job reads is documented under its variable, with the row's default (and, where the doc has a column
 * for it, its range); every variable the doc lists is one the job reads. A setting added, renamed or re-defaulted
 * in code fails here, naming the row and the page to update.
 */

/** What the relay Lambda (and `outbox relay`) reads: relayConfigFromEnv and the metrics. */
const RELAY_TABLES: Record<string, SettingsTable> = {
  RELAY_SETTINGS,
  DESTINATION_SETTINGS,
  CLAIM_CHECK_SETTINGS,
  DATABASE_SETTINGS,
  OUTBOX_LOCATION_SETTINGS,
  METRICS_SETTINGS,
};

/** What the purge Lambda reads: purgeConfigFromEnv (with the relay's route table, names only) and the metrics. */
const PURGE_TABLES: Record<string, SettingsTable> = {
  PURGE_SETTINGS,
  OUTBOX_LOCATION_SETTINGS,
  DESTINATION_SETTINGS: { routes: DESTINATION_SETTINGS.routes },
  "METRICS_SETTINGS (namespace, service)": {
    namespace: METRICS_SETTINGS.namespace,
    serviceName: METRICS_SETTINGS.serviceName,
  },
};

interface Documented {
  variable: string;
  default: string;
  /** The rest of the row: meaning, range. */
  rest: string[];
}

/**
 * The variables a table documents. A row may document several, `A` / `B` with defaults `a` / `b`; a row whose
 * first cell names no variable (a note) documents none.
 */
function documented(table: Table): Documented[] {
  return table.rows.flatMap(([names = "", defaults = "", ...rest]) => {
    const variables = codeSpans(names).filter((span) => /^[A-Z][A-Z0-9_]+$/.test(span));
    const values = variables.length > 1 ? defaults.split(" / ") : [defaults];
    return variables.map((variable, index) => ({ variable, default: values[index] ?? defaults, rest }));
  });
}

/** Whether a default cell says the row's default: the number (with or without thousands separators) or the word. */
function saysDefault(cell: string, row: Setting): boolean {
  if (row.default === undefined) return true; // unset means what the row's doc says; the cell explains it
  if (typeof row.default === "number") {
    const digits = cell.replace(/(\d)[,_ ](?=\d{3}\b)/g, "$1");
    return new RegExp(`(^|[^\\d.])${row.default}(?![\\d.])`).test(digits);
  }
  if (row.default === "") return cell.includes('`""`');
  return cell.includes(`\`${String(row.default)}\``);
}

function rowsOf(tables: Record<string, SettingsTable>) {
  return Object.entries(tables).flatMap(([table, rows]) =>
    Object.entries(rows).map(([option, row]) => ({ where: `${table}.${option}`, row })),
  );
}

/** What is wrong with a doc's table against the settings tables, one line each, naming what to write. */
function drift(doc: string, table: Table, tables: Record<string, SettingsTable>): string[] {
  const docs = documented(table);
  const problems: string[] = [];
  for (const { where, row } of rowsOf(tables)) {
    const entry = docs.find((item) => item.variable === row.env);
    if (entry === undefined) {
      problems.push(
        `${doc} lacks ${row.env} (${where}: default ${JSON.stringify(row.default)}; "${row.doc}"): add a row`,
      );
    } else if (!saysDefault(entry.default, row)) {
      problems.push(
        `${doc}: ${row.env}'s default is "${entry.default}", ${where} says ${JSON.stringify(row.default)}`,
      );
    }
  }
  const known = new Set(rowsOf(tables).map(({ row }) => row.env));
  for (const { variable } of docs) {
    if (!known.has(variable))
      problems.push(`${doc} documents ${variable}, which no settings row of this job reads`);
  }
  return problems;
}

describe("docs/configuration.md's relay environment table", () => {
  const table = tableUnder("docs/configuration.md", "Relay environment variables");

  it("documents every row of the relay's settings tables with its default, and nothing else", () => {
    expect(drift("docs/configuration.md", table, RELAY_TABLES)).toEqual([]);
  });

  it("the comparison sees a missing row, a wrong default and a stray variable", () => {
    const without = { ...table, rows: table.rows.filter((row) => !row[0]?.includes("`RELAY_BATCH_SIZE`")) };
    expect(drift("c.md", without, RELAY_TABLES)).toEqual([
      expect.stringMatching(/^c\.md lacks RELAY_BATCH_SIZE \(RELAY_SETTINGS\.batchSize: default 250/),
    ]);
    const wrong = { ...table, rows: [...without.rows, ["`RELAY_BATCH_SIZE`", "25", "rows"]] };
    expect(drift("c.md", wrong, RELAY_TABLES)).toEqual([
      'c.md: RELAY_BATCH_SIZE\'s default is "25", RELAY_SETTINGS.batchSize says 250',
    ]);
    const stray = { ...table, rows: [...table.rows, ["`RELAY_TURBO`", "on", "faster"]] };
    expect(drift("c.md", stray, RELAY_TABLES)).toEqual([
      "c.md documents RELAY_TURBO, which no settings row of this job reads",
    ]);
  });
});

describe("docs/metrics.md's purge environment table", () => {
  const table = tableUnder("docs/metrics.md", "Purge");

  it("documents every row the purge reads with its default, and nothing else", () => {
    const ours = { ...table, rows: table.rows.filter((row) => !row[0]?.includes("DATABASE_")) };
    expect(drift("docs/metrics.md", ours, PURGE_TABLES)).toEqual([]);
  });

  it("gives each integer row's range as the table accepts it", () => {
    const problems = Object.entries(PURGE_SETTINGS).flatMap(([option, row]) => {
      const entry = documented(table).find((item) => item.variable === row.env);
      const accepted = (entry?.rest[0] ?? "").replace(/,/g, "");
      return accepted === `${row.min}-${row.max}`
        ? []
        : [
            `docs/metrics.md: ${row.env} accepts "${entry?.rest[0]}", PURGE_SETTINGS.${option} ${row.min}-${row.max}`,
          ];
    });
    expect(problems).toEqual([]);
  });
});
