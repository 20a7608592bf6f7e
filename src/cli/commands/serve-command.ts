/**
 * `docket serve`: the HTTP API (and optionally local workers) from src/http/server.ts. Its flags
 * are generated from the server's own settings table, so each has the same name, environment
 * variable and validation as in the server's configuration; the CLI only passes them through.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { loadServerConfig, SERVER_SETTINGS } from '../../http/server-config.js';
import { waitForStopSignal } from '../stop-signal.js';

/** Builds the `serve` command. */
export function serveCommand() {
  const command = new Command('serve')
    .description('serve the HTTP API (and local workers with --concurrency > 0) until SIGTERM/SIGINT, then exit 0')
    .option(
      '--config <path>',
      'JSON config file (env $DOCKET_CONFIG); flags override the environment, which overrides the file',
    );
  for (const setting of SERVER_SETTINGS) {
    if (setting.flag === undefined) continue;
    command.addOption(new Option(`${setting.flag} <value>`, `${setting.description} (env $${setting.env})`));
  }
  return command.action(async (_options, self) => {
    const flags = self.opts() as Record<string, unknown>;
    const config = loadServerConfig({ flags, env: process.env });
    const stopRequested = waitForStopSignal();
    // Loaded on demand: the HTTP stack is not worth its start-up cost for every other command.
    const { startServer } = await import('../../http/server.js');
    const server = await startServer({ config });
    process.stderr.write(`docket: serving on ${server.url} (SIGTERM or Ctrl-C stops it)\n`);
    await stopRequested;
    await server.close();
  });
}
