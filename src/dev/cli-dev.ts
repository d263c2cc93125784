/** `svm dev ...`: the local control plane for development, tests and the demo. */
import { Command, InvalidArgumentError } from 'commander';
import { parseIntArg } from '../config/cli-options';
import {
  defaultDevDir,
  down,
  readState,
  restartApiserver,
  setStorageVersionApi,
  startControllerManager,
  stopControllerManager,
  up,
  type UpOptions as PlaneUpOptions,
} from './plane';
import { isRunning } from './processes';
import { mintTemporalToken, temporalPermission, TEMPORAL_ROLES, TEMPORAL_SYSTEM_SCOPE, type TemporalRole } from './temporal-auth';
import { kubeToolName, kubeVersions } from './tools';

export function devCommand(): Command {
  // Its one-line description is the composition root's (cli/svm.ts), given when the command is loaded.
  const dev = new Command('dev').addHelpText('after', '\nExamples:\n  svm dev up && source .svm-dev/env\n  svm dev down\n');
  upCommand(dev.command('up'));
  downCommand(dev.command('down'));
  tokenCommand(dev.command('token'));
  statusCommand(dev.command('status'));
  restartApiserverCommand(dev.command('restart-apiserver'));
  controllerManagerCommand(dev.command('controller-manager'));
  storageVersionApiCommand(dev.command('storage-version-api'));
  return dev;
}

/** `svm dev up`: start (or complete) the plane and print its environment. */
function upCommand(cmd: Command): Command {
  return cmd
    .description('start (or complete) the local control plane and print its environment')
    .option('--apiservers <n>', 'number of kube-apiservers sharing one etcd', parseIntArg('--apiservers', 1, 5))
    .option('--dir <dir>', 'state directory (logs, data, kubeconfigs, env)', defaultDevDir())
    .option(
      '--temporal <mode>',
      'which Temporal server a new plane runs: "dev" (the dev server on SQLite, quick; the default) or "server" (temporal-server on a private PostgreSQL 15, with its UI)',
      (v: string) => {
        if (v !== 'dev' && v !== 'server') throw new InvalidArgumentError(`expected dev or server, got "${v}"`);
        return v;
      },
    )
    .option(
      '--temporal-tls',
      'with --temporal server: the frontend requires mTLS (a CA and certificates made by the plane in DIR/pki/temporal); the env file gets TEMPORAL_TLS_* for every client',
    )
    .option('--no-temporal-tls', 'temporal-server without TLS (a plane that had it must be down first)')
    .option(
      '--temporal-auth',
      "with --temporal server: the frontend requires a JWT signed by the plane's key (temporal-server's claim mapper and default authorizer); the env file gets an administrator's TEMPORAL_API_KEY, `svm dev token` mints narrower ones; no Web UI",
    )
    .option('--no-temporal-auth', 'temporal-server without authorization (a plane that had it must be down first)')
    .option(
      '--temporal-arg <arg...>',
      'extra flag for the Temporal dev server (repeatable); with --temporal server only --dynamic-config-value KEY=VALUE and --log-level',
    )
    .option(
      '--storage-version-api',
      'serve the alpha StorageVersion API (off by default, as in real clusters); restarts running servers to switch',
    )
    .option('--no-storage-version-api', 'do not serve it (restarts running servers that do)')
    .option('--loopback', 'the fallback shape even as root: servers on 127.0.0.1 with their own ports, no load balancer')
    .option(
      '--kube-version <version>',
      `Kubernetes release of a new plane: ${kubeVersions().current} (default) or ${kubeVersions().previous}`,
    )
    .option(
      '--controller-manager <mode>',
      'kube-controller-manager, as every cluster runs it: "with-migrator" (its built-in storage version migrator on, as in ' +
        'a 1.37 cluster; the default for a plane that runs none yet), "without-migrator" (for svm with ' +
        'SVM_STANDARD_MIGRATIONS=own) or "none"',
      (v: string) => {
        if (v !== 'with-migrator' && v !== 'without-migrator' && v !== 'none')
          throw new InvalidArgumentError(`expected with-migrator, without-migrator or none, got "${v}"`);
        return v;
      },
    )
    .addHelpText(
      'after',
      '\nExamples:\n  svm dev up --dir .svm-dev --apiservers 2 --kube-version v1.36.3 --controller-manager with-migrator\n  svm dev up --dir .svm-pg --temporal server   # Temporal on PostgreSQL, as users deploy it\n  svm dev up --dir .svm-tls --temporal server --temporal-tls   # ... with mTLS required',
    )
    .action(planeUp);
}

/** What `svm dev up` is given: the plane's options (src/dev/plane.ts) as flags, and kube-controller-manager's mode. */
type UpFlags = Omit<PlaneUpOptions, 'tools' | 'log' | 'temporalArgs'> & { temporalArg?: string[]; controllerManager?: string };

/** `svm dev up`'s action: the plane up, kube-controller-manager as asked, the env file printed and a line on stderr. */
async function planeUp(o: UpFlags): Promise<void> {
  const started = Date.now();
  const before = readState(o.dir);
  // Like a cluster: kube-controller-manager with its built-in migrator unless told otherwise; one already
  // running is left as it is when no mode is given (a second `up` does not restart it).
  const cmMode = o.controllerManager ?? (isRunning(before?.controllerManager) ? undefined : 'with-migrator');
  const cmVersion = before?.controllerManager?.version ?? o.kubeVersion ?? before?.kubeVersion ?? kubeVersions().current;
  const { state, envText } = await up({
    // Built with the servers, in one go: the clients the env file names, and kube-controller-manager.
    tools: [
      'kubectl',
      'etcdctl',
      'temporal-cli',
      ...(cmMode && cmMode !== 'none' ? [kubeToolName('kube-controller-manager', cmVersion)] : []),
    ],
    dir: o.dir,
    apiservers: o.apiservers,
    temporalArgs: o.temporalArg,
    temporal: o.temporal,
    temporalTls: o.temporalTls,
    temporalAuth: o.temporalAuth,
    storageVersionApi: o.storageVersionApi,
    loopback: o.loopback,
    kubeVersion: o.kubeVersion,
  });
  if (cmMode === 'none') await stopControllerManager(o.dir);
  else if (cmMode) await startControllerManager(o.dir, { builtInMigrator: cmMode === 'with-migrator' });
  process.stdout.write(envText);
  process.stderr.write(`local control plane ready in ${((Date.now() - started) / 1000).toFixed(1)}s, ${planeLine(state, o.dir)}
`);
}

/** What a plane runs, in the words of `svm dev up`'s last line (after "ready in"). */
function planeLine(state: Awaited<ReturnType<typeof up>>['state'], dir: string): string {
  const cmNow = readState(dir)?.controllerManager;
  const servers = state.apiservers.map((a) => a.url).join(', ');
  const ts = state.temporalServer;
  const temporal =
    state.temporalMode === 'server'
      ? `server ${ts?.version} on PostgreSQL${ts?.tls ? ' (mTLS)' : ''}${ts?.auth ? ' (JWT authorization)' : ''}`
      : 'dev server';
  const cm = cmNow ? (cmNow.builtInMigrator ? 'with its built-in migrator' : 'without its built-in migrator') : 'none';
  return `${state.shape} shape, Kubernetes ${state.kubeVersion ?? kubeVersions().current}: API ${state.apiUrl} -> ${servers}; StorageVersion API ${state.storageVersionApi ? 'on' : 'off'}; Temporal ${temporal} ${state.temporal.port}; kube-controller-manager ${cm}; source ${dir}/env`;
}

/** `svm dev down`: stop what `up` started. */
function downCommand(cmd: Command): Command {
  return cmd
    .description('stop exactly what `svm dev up` started')
    .addHelpText('after', '\nExample:\n  svm dev down --dir .svm-dev\n')
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .action(async (o: { dir: string }) => {
      await down(o.dir);
    });
}

/** `svm dev token`: a Temporal token signed by the plane's key. */
function tokenCommand(cmd: Command): Command {
  return cmd
    .description("mint a Temporal token signed by the plane's key (a plane started with --temporal-auth), for one namespace and role")
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .requiredOption('--namespace <ns>', `the namespace the token is for ("${TEMPORAL_SYSTEM_SCOPE}" for every namespace)`)
    .option('--role <role>', `${TEMPORAL_ROLES.join(', ')}: what temporal-server's default authorizer lets it do there`, 'write')
    .option('--ttl <seconds>', 'how long it is valid', parseIntArg('--ttl', 1, 30 * 24 * 3600), 3600)
    .option('--subject <name>', "the token's subject (the principal Temporal records)", 'svm-dev')
    .addHelpText(
      'after',
      '\nExample:\n  TEMPORAL_API_KEY=$(svm dev token --dir .svm-auth --namespace east --role write) svm worker   # a worker that reaches one namespace\n',
    )
    .action((o: { dir: string; namespace: string; role: string; ttl: number; subject: string }) => {
      const auth = readState(o.dir)?.temporalServer?.auth;
      if (!auth)
        throw new Error(
          `the plane in ${o.dir} runs no Temporal authorization: svm dev up --dir ${o.dir} --temporal server --temporal-auth`,
        );
      const permission = temporalPermission(o.namespace, o.role as TemporalRole);
      process.stdout.write(`${mintTemporalToken(auth, { subject: o.subject, permissions: [permission], ttlSeconds: o.ttl })}\n`);
    });
}

/** `svm dev status`: each process of the plane, up or down. */
function statusCommand(cmd: Command): Command {
  return cmd
    .description('what the plane in --dir runs: each process with its pid, address and whether it is up')
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .addHelpText('after', '\nExample:\n  svm dev status --dir .svm-pg   # is PostgreSQL up? where is the UI?\n')
    .action((o: { dir: string }) => {
      const state = readState(o.dir);
      if (!state) {
        process.stdout.write(`no local control plane in ${o.dir}\n`);
        process.exitCode = 1;
        return;
      }
      const row = (what: string, rec: Parameters<typeof isRunning>[0], where: string) =>
        `${what.padEnd(26)} ${isRunning(rec) ? `up (pid ${rec!.pid})`.padEnd(18) : 'down'.padEnd(18)} ${where}\n`;
      const t = state.temporal;
      const ts = state.temporalServer;
      const lines = [
        `plane ${state.dir}: ${state.shape} shape, Kubernetes ${state.kubeVersion ?? kubeVersions().current}, Temporal ${state.temporalMode ?? 'dev'}\n`,
        row('etcd', state.etcd, `http://127.0.0.1:${state.etcd.clientPort}`),
        ...state.apiservers.map((a) => row(`kube-apiserver ${a.index}`, a, a.url)),
        ...(state.loadBalancer ? [row('haproxy', state.loadBalancer, state.apiUrl)] : []),
        ...(state.controllerManager ? [row('kube-controller-manager', state.controllerManager, state.controllerManager.version)] : []),
        ...(state.temporalMode === 'server' && ts
          ? [
              row('postgresql 15', ts.postgres, `127.0.0.1:${ts.postgres.port} (${ts.postgres.dataDir})`),
              row(
                `temporal-server ${ts.version}`,
                t,
                `127.0.0.1:${t.port}${ts.tls ? ` (mTLS, CA ${ts.tls.ca})` : ''}${ts.auth ? ` (JWT authorization, keys ${ts.auth.jwks})` : ''}`,
              ),
              ...(ts.auth ? [] : [row(`temporal-ui-server ${ts.ui.version}`, ts.ui, `http://127.0.0.1:${t.uiPort}`)]),
            ]
          : [row('temporal dev server', t, `127.0.0.1:${t.port}, UI http://127.0.0.1:${t.uiPort}`)]),
      ];
      process.stdout.write(lines.join(''));
    });
}

/** `svm dev restart-apiserver`: one API server again, with other flags or another release. */
function restartApiserverCommand(cmd: Command): Command {
  return cmd
    .description('restart one kube-apiserver, optionally with other flags (simulates a rolling upgrade step)')
    .argument('<index>', 'which API server (0-based)', parseIntArg('index', 0, 4))
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .option('--flags <flags>', 'replace its extra flags, space-separated (e.g. "--min-compatibility-version=1.34"); "" clears them')
    .option(
      '--kube-version <version>',
      `run another release (a rolling upgrade step): ${kubeVersions().current} or ${kubeVersions().previous}`,
    )
    .addHelpText('after', '\nExample:\n  svm dev restart-apiserver 0 --kube-version v1.37.2')
    .action(async (index: number, o: { dir: string; flags?: string; kubeVersion?: string }) => {
      const extra = o.flags === undefined ? undefined : o.flags.split(/\s+/).filter(Boolean);
      const a = await restartApiserver(o.dir, index, extra, undefined, { version: o.kubeVersion });
      process.stderr.write(
        `kube-apiserver ${index} ready on ${a.url}${a.netns ? ` (netns ${a.netns})` : ''} with [${a.extraArgs.join(' ')}]\n`,
      );
    });
}

/** `svm dev controller-manager`: the plane's kube-controller-manager started, restarted or stopped. */
function controllerManagerCommand(cmd: Command): Command {
  return cmd
    .description("start, restart (at another release) or stop the plane's kube-controller-manager")
    .argument('<mode>', 'with-migrator, without-migrator or stop')
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .option('--kube-version <version>', 'its release (a rolling upgrade step)')
    .addHelpText('after', '\nExample:\n  svm dev controller-manager without-migrator   # svm owns storagemigration.k8s.io objects')
    .action(async (mode: string, o: { dir: string; kubeVersion?: string }) => {
      if (mode === 'stop') return stopControllerManager(o.dir);
      if (mode !== 'with-migrator' && mode !== 'without-migrator')
        throw new InvalidArgumentError(`expected with-migrator, without-migrator or stop, got "${mode}"`);
      const r = await startControllerManager(o.dir, { builtInMigrator: mode === 'with-migrator', version: o.kubeVersion });
      process.stderr.write(
        `kube-controller-manager ${r.version} running (pid ${r.pid}), built-in migrator ${r.builtInMigrator ? 'on' : 'off'}\n`,
      );
    });
}

/** `svm dev storage-version-api`: the alpha StorageVersion API on or off. */
function storageVersionApiCommand(cmd: Command): Command {
  return cmd
    .description('turn the alpha StorageVersion API on or off on a running plane (restarts every API server)')
    .argument('<on|off>', 'on or off', (v: string) => {
      if (v !== 'on' && v !== 'off') throw new InvalidArgumentError(`expected "on" or "off", got "${v}"`);
      return v;
    })
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .addHelpText('after', '\nExample:\n  svm dev storage-version-api on   # servers publish StorageVersion objects\n')
    .action(async (mode: string, o: { dir: string }) => {
      await setStorageVersionApi(o.dir, mode === 'on');
      process.stderr.write(`StorageVersion API ${readState(o.dir)?.storageVersionApi ? 'on' : 'off'} on every API server\n`);
    });
}
