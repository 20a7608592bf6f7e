/**
 * The `docket` executable's entry: runs the CLI and exits with its code. bin/docket.js imports
 * this file (through tsx in a source checkout, from dist/ when built); `npm run docket` runs it.
 */
import { runCli } from './run-cli.js';

const exitCode = await runCli(process.argv);
process.exitCode = exitCode;
// A safety net, unref'd so it never delays a clean exit: a handle some library forgot to close
// must not turn a finished command into a hung one in a script.
setTimeout(() => process.exit(exitCode), 2000).unref();
