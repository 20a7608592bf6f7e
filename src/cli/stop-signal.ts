/**
 * Graceful stop for long-running commands (`work`, `serve`): the first SIGTERM or SIGINT asks for
 * a clean stop; a second one exits at once, since an operator pressing Ctrl-C twice means it.
 * Exiting early loses nothing: unfinished jobs come back when their leases lapse.
 *
 * Launched through npm (`npx docket work`, `npm run worker`), the process is not the one that
 * receives the signal: npm runs `sh -c docket …`, forwards SIGTERM to that shell, and the shell
 * dies without passing it on, leaving the worker orphaned and running. So under npm the death of
 * the parent process counts as a stop request too. Outside npm (node directly, Docker, systemd)
 * the parent is left alone: a worker started with `nohup … &` must outlive its shell.
 */

/** How often the parent process is checked under npm, ms. Short enough that a stop feels prompt. */
export const PARENT_CHECK_INTERVAL_MS = 500;

/** True when npm (npx, npm exec, npm run) started this process, through a shell it may outlive. */
export function launchedByNpm(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.npm_command !== undefined || env.npm_lifecycle_event !== undefined;
}

/**
 * Resolves with the first SIGTERM/SIGINT (or, under npm, 'SIGTERM' when the parent process that
 * npm's signal went to has gone); on a second signal, calls `onForcedExit` and exits 1.
 */
export function waitForStopSignal(onForcedExit: (signal: NodeJS.Signals) => void = () => {}): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let stopping = false;
    let parentWatch: NodeJS.Timeout | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        onForcedExit(signal);
        process.exit(1);
      }
      stopping = true;
      if (parentWatch) clearInterval(parentWatch);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    if (launchedByNpm()) {
      const parent = process.ppid;
      parentWatch = setInterval(() => {
        // process.ppid is read afresh each time: an orphan is re-parented to init or a subreaper.
        if (process.ppid !== parent) onSignal('SIGTERM');
      }, PARENT_CHECK_INTERVAL_MS);
      // The watch alone must not keep the process alive once the command is done.
      parentWatch.unref();
    }
  });
}
