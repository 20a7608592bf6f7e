/**
 * Graceful stop for long-running commands (`work`, `serve`): the first SIGTERM or SIGINT asks for
 * a clean stop; a second one exits at once, since an operator pressing Ctrl-C twice means it.
 * Exiting early loses nothing: unfinished jobs come back when their leases lapse.
 */

/** Resolves with the first SIGTERM/SIGINT; on a second, calls `onForcedExit` and exits 1. */
export function waitForStopSignal(onForcedExit: (signal: NodeJS.Signals) => void = () => {}): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        onForcedExit(signal);
        process.exit(1);
      }
      stopping = true;
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
