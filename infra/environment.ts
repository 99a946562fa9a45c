import { Token } from "aws-cdk-lib";
import { type Setting, settingText } from "../functions/shared/util/settings.ts";

/** One variable the construct writes: the prop it comes from (for errors), the table row, and the value. */
export type EnvironmentEntry = readonly [
  prop: string,
  row: Setting,
  value: string | number | boolean | undefined,
];

/**
 * A Lambda's environment from the handlers' own settings tables (functions/shared/<job>/settings.ts): each
 * variable under its row's name, each value checked against its row's range at synth, so a prop the handler
 * would refuse fails `cdk synth` naming the prop rather than the function's first cold start. An undefined
 * value is left out: the handler then applies the row's default, which is written only in the table.
 * Unresolved tokens (a value known only at deploy time) are written as they are.
 */
export function environmentOf(
  construct: string,
  entries: readonly EnvironmentEntry[],
): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [prop, row, value] of entries) {
    if (value === undefined) continue;
    environment[row.env] = Token.isUnresolved(value)
      ? String(value)
      : settingText(`${construct} ${prop}`, row, value);
  }
  return environment;
}
