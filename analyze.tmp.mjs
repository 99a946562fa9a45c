import { build } from "esbuild";
import { bundleOptions } from "/work/wt/integ/scripts/lambdaBundles.ts";
const r = await build({ ...bundleOptions("relay", "/tmp/relaybundle"), metafile: true, write: false });
const byPkg = {};
for (const [file, info] of Object.entries(r.metafile.outputs)) {
  for (const [input, i] of Object.entries(info.inputs)) {
    const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
    const k = m ? m[1] : "own";
    byPkg[k] = (byPkg[k] ?? 0) + i.bytesInOutput;
  }
}
console.log(Object.entries(byPkg).sort((a,b)=>b[1]-a[1]).slice(0,15).map(([k,v])=>`${k} ${Math.round(v/1024)}`).join("\n"));
