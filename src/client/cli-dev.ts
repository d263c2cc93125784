/** `svm dev ...`: the local control plane for development, tests and the demo. */
import { Command, InvalidArgumentError } from 'commander';
import { defaultDevDir, down, restartApiserver, up } from '../dev/plane';

export function parseIntArg(name: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number, got "${value}"`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}

export function devCommand(): Command {
  const dev = new Command('dev').description('a local control plane: etcd, HA kube-apiservers and the Temporal dev server, on 127.0.0.1');
  dev
    .command('up')
    .description('start (or complete) the local control plane and print its environment')
    .option('--apiservers <n>', 'number of kube-apiservers sharing one etcd', parseIntArg('--apiservers', 1, 5))
    .option('--dir <dir>', 'state directory (logs, data, kubeconfigs, env)', defaultDevDir())
    .option('--temporal-arg <arg...>', 'extra flag for the Temporal dev server (repeatable)')
    .action(async (o: { apiservers?: number; dir: string; temporalArg?: string[] }) => {
      const started = Date.now();
      const { envText } = await up({ dir: o.dir, apiservers: o.apiservers, temporalArgs: o.temporalArg });
      process.stdout.write(envText);
      process.stderr.write(`local control plane ready in ${((Date.now() - started) / 1000).toFixed(1)}s; source ${o.dir}/env\n`);
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
      process.stderr.write(`kube-apiserver ${index} ready on 127.0.0.1:${a.port} with [${a.extraArgs.join(' ')}]\n`);
    });
  return dev;
}
