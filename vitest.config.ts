import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Instance threads and child servers use both cores: run test files one at a time.
    fileParallelism: false,
    // Temporary repositories and files go under one directory per run, removed at its end.
    globalSetup: ['./test/helpers/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
