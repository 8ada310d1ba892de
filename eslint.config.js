// ESLint flat config: typescript-eslint's recommended rules, plus the purity rule for core.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'bench/out/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setImmediate: 'readonly', performance: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', AbortController: 'readonly', fetch: 'readonly', Response: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // @triode/core is pure: no HTTP, gRPC, Redis or threads (STYLE.md rule 2).
    files: ['packages/core/src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: ['hono', '@hono/node-server', '@grpc/grpc-js', 'ioredis', 'bullmq', 'piscina', 'onnxruntime-node', 'node:http', 'node:http2', 'node:net', 'node:worker_threads'].map((name) => ({ name, message: '@triode/core must stay free of transports and threads' })),
        patterns: [{ group: ['@triode/*'], message: '@triode/core depends on no other Triode package' }],
      }],
    },
  },
  {
    // The frontends serve embedded mode and a cluster gateway alike: Redis is the cluster package's.
    files: ['packages/frontends/src/**/*.ts'],
    ignores: ['packages/frontends/src/**/*.test.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: ['ioredis', 'bullmq', 'piscina', 'onnxruntime-node'].map((name) => ({ name, message: '@triode/frontends know only core\'s Backplane: no Redis, threads or models here' })),
        patterns: [{ group: ['@triode/cluster', '@triode/backends', '@triode/cli'], message: '@triode/frontends depend on @triode/core only' }],
      }],
    },
  },
  {
    // Cluster mode's code is transport-free of HTTP/gRPC: it speaks Redis and TCP only.
    files: ['packages/cluster/src/**/*.ts'],
    ignores: ['packages/cluster/src/**/*.test.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: ['hono', '@hono/node-server', '@grpc/grpc-js'].map((name) => ({ name, message: '@triode/cluster knows no frontend protocol' })),
        patterns: [{ group: ['@triode/frontends', '@triode/cli'], message: '@triode/cluster depends on @triode/core only' }],
      }],
    },
  },
);
