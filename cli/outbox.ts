#!/usr/bin/env node
import { runCli } from "./program.ts";

const code = await runCli(process.argv);
// Exit explicitly: an SDK keep-alive socket or a pool timer must not keep a finished command alive.
process.exit(code);
