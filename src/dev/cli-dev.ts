/** `svm dev ...`: the local control plane for development, tests and the demo. */
import { Command, InvalidArgumentError } from 'commander';
import { parseIntArg } from '../config/cli-options';
import { defaultDevDir, down, readState, restartApiserver, setStorageVersionApi, up } from './plane';

export function devCommand(): Command {
  const dev = new Command('dev').description(
    'a local control plane shaped like a cluster: etcd, HA kube-apiservers each in its own network namespace behind haproxy, and the Temporal dev server',
  );
  dev
    .command('up')
    .description('start (or complete) the local control plane and print its environment')
    .option('--apiservers <n>', 'number of kube-apiservers sharing one etcd', parseIntArg('--apiservers', 1, 5))
    .option('--dir <dir>', 'state directory (logs, data, kubeconfigs, env)', defaultDevDir())
    .option('--temporal-arg <arg...>', 'extra flag for the Temporal dev server (repeatable)')
    .option(
      '--storage-version-api',
      'serve the alpha StorageVersion API (off by default, as in real clusters); restarts running servers to switch',
    )
    .option('--no-storage-version-api', 'do not serve it (restarts running servers that do)')
    .option('--loopback', 'the fallback shape even as root: servers on 127.0.0.1 with their own ports, no load balancer')
    .action(async (o: { apiservers?: number; dir: string; temporalArg?: string[]; storageVersionApi?: boolean; loopback?: boolean }) => {
      const started = Date.now();
      const { state, envText } = await up({
        dir: o.dir,
        apiservers: o.apiservers,
        temporalArgs: o.temporalArg,
        storageVersionApi: o.storageVersionApi,
        loopback: o.loopback,
      });
      process.stdout.write(envText);
      const servers = state.apiservers.map((a) => a.url).join(', ');
      process.stderr.write(
        `local control plane ready in ${((Date.now() - started) / 1000).toFixed(1)}s, ${state.shape} shape: API ${state.apiUrl} -> ${servers}; StorageVersion API ${state.storageVersionApi ? 'on' : 'off'}; source ${o.dir}/env\n`,
      );
    });
  dev
    .command('down')
    .description('stop exactly what `svm dev up` started')
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .action(async (o: { dir: string }) => {
      await down(o.dir);
    });
  dev
    .command('restart-apiserver')
    .description('restart one kube-apiserver, optionally with other flags (simulates a rolling upgrade step)')
    .argument('<index>', 'which API server (0-based)', parseIntArg('index', 0, 4))
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .option('--flags <flags>', 'replace its extra flags, space-separated (e.g. "--min-compatibility-version=1.33"); "" clears them')
    .action(async (index: number, o: { dir: string; flags?: string }) => {
      const extra = o.flags === undefined ? undefined : o.flags.split(/\s+/).filter(Boolean);
      const a = await restartApiserver(o.dir, index, extra);
      process.stderr.write(
        `kube-apiserver ${index} ready on ${a.url}${a.netns ? ` (netns ${a.netns})` : ''} with [${a.extraArgs.join(' ')}]\n`,
      );
    });
  dev
    .command('storage-version-api')
    .description('turn the alpha StorageVersion API on or off on a running plane (restarts every API server)')
    .argument('<on|off>', 'on or off', (v: string) => {
      if (v !== 'on' && v !== 'off') throw new InvalidArgumentError(`expected "on" or "off", got "${v}"`);
      return v;
    })
    .option('--dir <dir>', 'state directory', defaultDevDir())
    .action(async (mode: string, o: { dir: string }) => {
      await setStorageVersionApi(o.dir, mode === 'on');
      process.stderr.write(`StorageVersion API ${readState(o.dir)?.storageVersionApi ? 'on' : 'off'} on every API server\n`);
    });
  return dev;
}
