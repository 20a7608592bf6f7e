import { defineConfig } from 'vitest/config';

// Test files run in separate processes (forks): worker-runtime tests spawn and kill real
// processes and must not share a module graph. Two at a time matches the 2-core machine.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // Names the client behind a pg 'error' nobody listened for (see the file).
    setupFiles: ['test/support/pg-error-origin.ts'],
  },
});
