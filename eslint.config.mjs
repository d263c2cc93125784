// The workflow sandbox is enforced here: workflow code is bundled and replayed
// deterministically, so it may not import Node built-ins, the Kubernetes client
// or anything else that does I/O. Activities are imported as types only.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];
/**
 * The import patterns of layers (folders of src): any module in one and its index. Note: the index is matched by
 * its relative path ('../client'), never by '**' + '/client', which would match '@temporalio/client' too.
 */
const layers = (...names) => names.flatMap((name) => [`../${name}`, `../../${name}`, `**/${name}/**`]);

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
  // The layers' arrows (the table 'What each layer may import' in docs/architecture.md says them layer by layer):
  // api <- kube <- activities <- worker; api <- config <- client, worker (kube takes only build-info from config;
  // api takes only the names of reasons from the contract, reasons.ts, which imports nothing);
  // api <- contract (what workflows, activities and clients exchange) <- kube, workflows, activities, client, worker;
  // workflows import only api and the contract (other layers as types only); the client imports api, kube, config and
  // the contract (workflow code as types only); activities import no workflow module; nothing in src imports src/dev
  // (the top: the plane, the fixtures) except src/dev itself (the `svm` command is composed outside src, in
  // cli/svm.ts); nothing in src imports the tests, and bench does not either.
  // A file gets one 'no-restricted-imports' (a later block replaces an earlier one), so each block lists all of its rules.
  // The default for any file in src (a folder without a block of its own below included); the layers' blocks replace it.
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: layers('dev'),
              message: 'Nothing in src imports src/dev but src/dev itself (the svm command is composed in cli/svm.ts).',
            },
            { group: ['**/test/**', '../test', '../../test'], message: 'Nothing in src imports the tests.' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [...layers('kube', 'activities', 'worker', 'client', 'workflows', 'config', 'dev'), '**/test/**'],
              message: 'src/api is the bottom layer: schemas and pure names only.',
            },
            {
              // The names of reasons and failure types are written once, in src/contract/reasons.ts, which imports nothing.
              group: ['**/contract/**', '!**/contract/reasons'],
              message: 'src/api is the bottom layer: of the contract it takes only the names of reasons (src/contract/reasons.ts).',
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
              group: [...layers('activities', 'worker', 'client', 'workflows', 'dev'), '**/test/**'],
              message: "src/kube talks to Kubernetes for the layers above it; it imports only src/api (and the contract's types).",
            },
            {
              // Note: '**/config/**', not layers('config'): a folder matched whole cannot have one of its files let through.
              group: ['**/config/**', '!**/config/build-info'],
              message: "src/kube takes only svm's version from src/config (build-info.ts, for its User-Agent); settings are passed in.",
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
          patterns: [
            {
              group: [...layers('client', 'dev'), '**/test/**'],
              message: 'Activities sit below the client and never use the dev plane or tests.',
            },
            {
              group: layers('worker'),
              allowTypeImports: true,
              message: 'Activities are given what the worker has (dependency injection): types only.',
            },
            {
              group: layers('workflows'),
              message: 'Activities import the contract (src/contract), never a workflow module.',
            },
          ],
        },
      ],
    },
  },
  // The contract: what workflows, activities and clients exchange (schemas, signals, updates, queries, start options,
  // search attributes). Bundled into the workflows, so pure; above it only src/api.
  {
    files: ['src/contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({ name, message: 'The contract is bundled into workflows: no Node built-ins.' })),
          patterns: [
            {
              group: [...layers('kube', 'activities', 'worker', 'client', 'workflows', 'config', 'dev'), '**/test/**'],
              message: 'src/contract sits below workflows, activities and clients: it imports only src/api.',
            },
          ],
        },
      ],
    },
  },
  // Shared settings (Temporal connection, CLI flags) sit below the client and the worker: they import only src/api.
  {
    files: ['src/config/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [...layers('kube', 'activities', 'worker', 'client', 'workflows', 'contract', 'dev'), '**/test/**'],
              message: 'src/config is shared by the client and the worker: it imports only src/api.',
            },
          ],
        },
      ],
    },
  },
  // The client: api, kube, config and workflow definitions (workflow code as types only). The worker's command and
  // `svm dev` are added to the `svm` program by the composition root (cli/svm.ts), not imported here.
  {
    files: ['src/client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: layers('worker', 'activities'),
              message: 'The client does not import the worker or activities (shared settings: src/config; commands: cli/svm.ts).',
            },
            {
              group: layers('dev'),
              message: 'Nothing in src imports src/dev but src/dev itself (the svm command is composed in cli/svm.ts).',
            },
            { group: ['**/test/**', '../test', '../../test'], message: 'Nothing in src imports the tests.' },
            {
              group: layers('workflows'),
              allowTypeImports: true,
              message: 'The client starts workflows by name: workflow code as types only (the contract holds the rest).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/worker/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: layers('client'), message: 'The worker does not import the client (shared settings: src/config).' },
            {
              group: layers('dev'),
              message: 'Nothing in src imports src/dev but src/dev itself: have it passed in by the composition root (cli/svm.ts).',
            },
            { group: ['**/test/**', '../test', '../../test'], message: 'Nothing in src imports the tests.' },
          ],
        },
      ],
    },
  },
  // src/dev is the top of the stack (it may import every layer); cli/svm.ts, the `svm` command, composes the layers' commands.
  {
    files: ['src/dev/**/*.ts', 'cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/test/**', '../test', '../../test'], message: 'Nothing in src imports the tests.' }] },
      ],
    },
  },
  // Benchmarks share fixtures with the tests through src/dev, never by importing test/.
  {
    files: ['bench/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/test/**', '../test'], message: 'bench does not import the tests: shared fixtures live in src/dev.' }] },
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
            { group: layers('kube'), message: 'Workflow code may not import the kube layer.' },
            { group: [...layers('dev'), '**/test/**'], message: 'Nothing in src imports src/dev or the tests.' },
            {
              group: layers('activities', 'worker', 'client', 'config'),
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
