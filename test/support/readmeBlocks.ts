/** README's ts blocks whose fence names a file ("```ts producer.ts"): the file's text, by name. */
export function namedBlocks(markdown: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const match of markdown.matchAll(/^```ts ([\w.-]+\.ts)\n([\s\S]*?)^```$/gm)) {
    files.set(match[1] ?? "", match[2] ?? "");
  }
  return files;
}
