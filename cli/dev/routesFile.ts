/**
 * `--routes routes.json`: the table OUTBOX_ROUTES takes (docs/routing.md), read from a file and checked by the
 * relay's own parser, so an error names the file, the route and the field, before anything starts.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { parseRoutes, type RouteSetting } from "../../functions/shared/destinations/routing/routes.ts";
import type { TargetSetting } from "../../functions/shared/destinations/targets.ts";
import { CliError, EXIT_USAGE } from "../errors.ts";

export interface RoutesFile {
  /** The file's text: the relay's OUTBOX_ROUTES. */
  text: string;
  routes: RouteSetting[];
  /** Each destination once, in the order the routes name them. */
  destinations: TargetSetting[];
}

export async function readRoutesFile(file: string, cwd: string): Promise<RoutesFile> {
  const path = resolve(cwd, file);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new CliError(
      `--routes ${file}: cannot read ${path} (${(error as NodeJS.ErrnoException).code})`,
      EXIT_USAGE,
    );
  }
  let routes: RouteSetting[];
  try {
    routes = parseRoutes(text, `--routes ${file}`);
  } catch (error) {
    throw new CliError((error as Error).message, EXIT_USAGE, { cause: error });
  }
  const seen = new Map<string, TargetSetting>();
  for (const { destination } of routes) seen.set(JSON.stringify(destination), destination);
  return { text, routes, destinations: [...seen.values()] };
}
