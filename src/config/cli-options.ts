/** Command-line pieces every `svm` command shares, whichever layer registers the command. */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { CLUSTER_NAME_PATTERN, CLUSTER_NAME_RULE } from '../api/cluster-name';

/** A whole-number argument within [min, max]; commander reports the message and exits 1 otherwise. */
export function parseIntArg(name: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number, got "${value}"`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}

/**
 * The line a command ends with when it fails: `error: <message>`, the one prefix of every svm error, as kubectl's
 * (and commander's own, for a bad flag). A note that does not stop the command is `warning: <message>`.
 */
export const errorLine = (err: unknown): string => `error: ${explained(err)}\n`;

/**
 * An error's message, saying which service failed where the message alone does not: a Kubernetes API that did not
 * answer (a transport error of the kube layer, its KubeErrorInfo.server) is named with its address.
 */
function explained(err: unknown): string {
  const e = err as { message?: string; kind?: string; info?: { server?: string } } | undefined;
  if (e?.kind === 'network' && e.info?.server)
    return `the Kubernetes API at ${e.info.server} did not answer (${e.message}): check the kubeconfig (KUBECONFIG or --kubeconfig) and that the API server, or the tunnel to it, is running`;
  return err instanceof Error ? err.message : String(err);
}
export const warningLine = (message: string): string => `warning: ${message}\n`;

export const kubeconfigOption = () => new Option('--kubeconfig <path>', 'kubeconfig (default: KUBECONFIG, ~/.kube/config or in-cluster)');

/** `--context <name>`: the kubeconfig's context to use, as kubectl's (a name it does not have is refused when it is read). */
export const contextOption = () =>
  new Option('--context <name>', "the kubeconfig context to use (default: the kubeconfig's current-context)");

/**
 * The output formats of a command that prints a table, as kubectl's: `text` (the table), `wide` (more columns, where
 * a command has them), `json` and `yaml` (the same object, a stable shape: docs/cli.md), `name` (one name a line).
 */
export type OutputFormat = 'text' | 'wide' | 'json' | 'yaml' | 'name';

/** `-o, --output <format>`: the given formats only; a format not among them is refused before anything connects. */
export const outputOption = (formats: readonly OutputFormat[] = ['text', 'json', 'yaml', 'name']) =>
  new Option('-o, --output <format>', 'output format').choices(formats).default('text');

/** `-w, --watch`, as kubectl's: what the command then prints until it is interrupted (Ctrl-C), in its own words. */
export const watchOption = (description: string) => new Option('-w, --watch', description);

/** Appends an "Example(s):" section to a command's --help (every svm command has one). */
export function withExamples<C extends Command>(cmd: C, examples: string[]): C {
  cmd.addHelpText('after', `\n${examples.length > 1 ? 'Examples' : 'Example'}:\n${examples.map((e) => `  ${e}`).join('\n')}\n`);
  return cmd;
}

/**
 * `--cluster <name>`: the cluster a command works on when one Temporal namespace serves several (docs/fleet.md).
 * It overrides SVM_CLUSTER for the command (the command passes it on where it connects), after checking the name;
 * unset, SVM_CLUSTER or, without it, the single-cluster IDs and task queue.
 */
export const clusterOption = () =>
  new Option(
    '--cluster <name>',
    'the cluster, when one Temporal namespace serves several (default: SVM_CLUSTER; none: one cluster)',
  ).argParser((value: string): string => {
    if (!CLUSTER_NAME_PATTERN.test(value)) throw new InvalidArgumentError(`--cluster: ${CLUSTER_NAME_RULE}, got "${value}"`);
    return value;
  });
