/**
 * Reading the CLI and the library from the outside, for the tests that check every setting is
 * reachable from each face: the option names a library error lists, and a command of the real
 * program by its path.
 */
import type { Command } from '@commander-js/extra-typings';
import { createProgram } from '../../src/cli/run-cli.js';

/**
 * The option names a library error lists after "(known: …)", sorted; `thrower` may throw or
 * reject. Fails when it does neither, or its error lists no names.
 */
export async function knownOptionNames(thrower: () => unknown): Promise<string[]> {
  try {
    await thrower();
  } catch (error) {
    const list = /\(known: ([^)]*)\)/.exec((error as Error).message)?.[1];
    if (list) return list.split(', ').sort();
  }
  throw new Error('expected an unknown-option error listing the known names');
}

/** The command of a freshly built program at `path` (e.g. `['schedules', 'add']`); throws when there is none. */
export function commandAt(path: readonly string[]): Command {
  let command = createProgram() as unknown as Command;
  for (const name of path) {
    const next = command.commands.find((sub) => sub.name() === name) as Command | undefined;
    if (!next) throw new Error(`no command ${path.join(' ')}`);
    command = next;
  }
  return command;
}
