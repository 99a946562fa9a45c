/**
 * `--routes routes.json`: the table OUTBOX_ROUTES takes (docs/routing.md), read from a file and checked by the
 * relay's own parser, so an error names the file, the route and the field, before anything starts.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { parseRoutes, type RouteSetting } from "../../functions/shared/destinations/routing/routes.ts";
import type { TargetSetting } from "../../functions/shared/destinations/targets.ts";
import { CliError, EXIT_USAGE } from "../errors.ts";
import { ACCOUNT, REGION } from "./aws/account.ts";

export interface RoutesFile {
  /** The relay's OUTBOX_ROUTES: the file's table, its ARNs in the local account and region. */
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
  try {
    parseRoutes(text, `--routes ${file}`);
  } catch (error) {
    throw new CliError((error as Error).message, EXIT_USAGE, { cause: error });
  }
  const local = localRouteTable(text);
  const localRoutes = parseRoutes(local, `--routes ${file}`);
  const seen = new Map<string, TargetSetting>();
  for (const { destination } of localRoutes) seen.set(JSON.stringify(destination), destination);
  return { text: local, routes: localRoutes, destinations: [...seen.values()] };
}

/**
 * The table with every ARN moved to the local endpoint's account and region, which is where its resources are
 * created (a table written for AWS names its own account and region; the local endpoints answer only for theirs).
 * Queue URLs stay: the endpoints find a queue by its name.
 */
function localRouteTable(text: string): string {
  const routes = JSON.parse(text) as { destination: Record<string, unknown> }[];
  for (const { destination } of routes) {
    for (const field of ["topicArn", "streamArn", "busName", "eventBusName"]) {
      const value = destination[field];
      if (typeof value === "string")
        destination[field] = value.replace(ARN_PLACE, `$1:${REGION}:${ACCOUNT}:`);
    }
  }
  return JSON.stringify(routes);
}

/** `arn:<partition>:<service>:<region>:<account>:` */
const ARN_PLACE = /^(arn:[a-z-]+:[a-z0-9-]+):[a-z0-9-]*:\d{12}:/;
