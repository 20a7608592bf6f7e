/**
 * `docket serve`: the HTTP API (and optionally local workers) from src/http/server.ts. Its flags
 * are generated from the server's own settings table, which is built from the same lists as
 * `docket work`'s (src/cli/cli-settings.ts): every store option, Docket option and worker option
 * has the same flag, environment variable, config-file key and default on both commands, and
 * the server's validation, so an error names the setting and where its value came from.
 */
import { Command } from '@commander-js/extra-typings';
import { loadServerConfig, SERVER_SETTINGS, type SettingGroup, WORK_ONLY_SETTINGS } from '../../http/server-config.js';
import { configOption, optionFor } from '../cli-settings.js';
import { loadHandlers } from '../load-handlers.js';
import { waitForStopSignal } from '../stop-signal.js';

/** The `--help` heading of each group of settings. */
const HELP_GROUPS: Record<SettingGroup, string> = {
  server: 'Server options:',
  store: 'Store options (as for every database command):',
  docket: 'Docket options (as for docket work):',
  worker:
    'Local worker options (as for docket work; for both the built-in and the handlers worker unless said otherwise):',
};

/** Builds the `serve` command. */
export function serveCommand() {
  const command = new Command('serve').description(
    'serve the HTTP API until SIGTERM/SIGINT, then answer the requests in flight and exit 0; local workers ' +
      '(--concurrency > 0) run only built-in kinds (docket.webhook) and the kinds of --handlers FILE. ' +
      'One --config file may configure both serve and work: each key is honoured where it applies; ' +
      `${Object.keys(WORK_ONLY_SETTINGS).join(' and ')} (work's metrics endpoint) are accepted here and ignored ` +
      'with a warning, as serve answers /metrics on --port. Secrets (tokens, webhookSecret, receiptSecret) come ' +
      'from the environment or the file only.',
  );
  command.addOption(configOption().helpGroup(HELP_GROUPS.server));
  for (const setting of SERVER_SETTINGS) {
    if (setting.flag === undefined) continue;
    // No commander choices: the server's own check names the source ("synchronous (from --synchronous): …").
    const options = optionFor({ ...setting, flag: setting.flag, choices: undefined });
    for (const option of options) command.addOption(option.helpGroup(HELP_GROUPS[setting.group]));
  }
  return command.action(async (_options, self) => {
    const flags = self.opts() as Record<string, unknown>;
    const config = loadServerConfig({ flags, env: process.env });
    const stopRequested = waitForStopSignal();
    // Loaded on demand: the HTTP stack is not worth its start-up cost for every other command.
    const { startServer } = await import('../../http/server.js');
    const handlers = config.handlers;
    const server = await startServer({
      config,
      setup: handlers === undefined ? undefined : (docket) => loadHandlers(docket, handlers),
    });
    // The first line keeps its shape ("serving on URL (…)"): scripts and supervisors read the URL from it.
    process.stderr.write(`docket: serving on ${server.url} (SIGTERM or Ctrl-C stops it)\n`);
    if (config.dashboardPath !== false) {
      const path = config.dashboardPath === '/' ? '/' : `${config.dashboardPath}/`;
      process.stderr.write(`docket: dashboard at ${server.url}${path}\n`);
    }
    await stopRequested;
    await server.close();
  });
}
