// The workflow sandbox is enforced here: workflow code is bundled and replayed
// deterministically, so it may not import Node built-ins, the Kubernetes client
// or anything else that does I/O. Activities are imported as types only.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.svm-dev/**', 'bin/**', 'eslint.config.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // The layers' arrows (README, Architecture): api <- kube <- activities <- worker; workflows import
  // only api and their own definitions; nothing in src imports the tests.
  {
    files: ['src/api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '**/kube',
                '**/kube/**',
                '**/activities',
                '**/activities/**',
                '**/worker/**',
                '**/client/**',
                '**/workflows/**',
                '**/dev/**',
                '**/test/**',
              ],
              message: 'src/api is the bottom layer: schemas and pure names only.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/kube/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/activities', '**/activities/**', '**/worker/**', '**/client/**', '**/workflows/**', '**/dev/**', '**/test/**'],
              message: 'src/kube talks to Kubernetes for the layers above it; it imports only src/api.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/activities/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: '../workflows', allowTypeImports: true, message: 'Activities import workflow definitions, never workflow code.' },
          ],
          patterns: [
            {
              group: ['**/client/**', '**/dev/**', '**/test/**'],
              message: 'Activities sit below the client and never use the dev plane or tests.',
            },
            {
              group: ['**/worker/**'],
              allowTypeImports: true,
              message: 'Activities are given what the worker has (dependency injection): types only.',
            },
            {
              group: ['**/workflows/migrate-resource', '**/workflows/trigger', '**/workflows/index'],
              allowTypeImports: true,
              message: 'Activities import workflow definitions (definitions, start-options, trigger-logic), never workflow code.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/api/**', 'src/kube/**', 'src/activities/**', 'src/workflows/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/test/**', '../test', '../../test'], message: 'Nothing in src imports the tests.' }] },
      ],
    },
  },
  {
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...nodeBuiltins.map((name) => ({ name, message: 'Workflow code is deterministic: no Node built-ins. Do I/O in an activity.' })),
            { name: '@kubernetes/client-node', message: 'Workflow code may not talk to Kubernetes: call an activity.' },
            { name: '@temporalio/activity', message: 'Workflows do not import activity runtime code.' },
            { name: '@temporalio/worker', message: 'Workflows do not import worker code.' },
            { name: '@temporalio/client', message: 'Workflows do not import client code.' },
          ],
          patterns: [
            { group: ['**/kube', '**/kube/**'], message: 'Workflow code may not import the kube layer.' },
            {
              group: ['**/activities', '**/activities/**', '**/worker/**', '**/client/**', '**/dev/**'],
              allowTypeImports: true,
              message: 'Workflows import activity/worker code as types only (import type).',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow.' },
        { name: 'setInterval', message: 'Use sleep() from @temporalio/workflow.' },
        { name: 'fetch', message: 'No I/O in workflows.' },
        { name: 'process', message: 'No process access in workflows.' },
      ],
    },
  },
);
