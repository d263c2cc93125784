/** `svm version`: svm's version and revision, the workflow contract's version and the Temporal SDK's (read from package.json files: nothing of the SDK is loaded). */
import * as fs from 'node:fs';
import { Command } from 'commander';
import { CONTRACT_VERSION } from '../contract/version';
import { outputOption, withExamples, type OutputFormat } from '../config/cli-options';
import { formatted } from './table';
import { svmBuild } from '../config/build-info';

export { gitRevision } from '../config/build-info';

export interface VersionInfo {
  svm: string;
  revision: string;
  contract: string;
  temporalSdk: string;
}

export function versionInfo(): VersionInfo {
  const { version, revision } = svmBuild();
  const sdk = JSON.parse(fs.readFileSync(require.resolve('@temporalio/client/package.json'), 'utf8')) as { version: string };
  return { svm: version, revision, contract: CONTRACT_VERSION, temporalSdk: sdk.version };
}

export function versionCommand(): Command {
  const cmd = new Command('version').addOption(outputOption(['text', 'json', 'yaml'])).action((o: { output: OutputFormat }) => {
    const v = versionInfo();
    process.stdout.write(
      formatted(o.output, v, {
        names: () => [v.svm],
        text: () => `svm ${v.svm} (revision ${v.revision})\nworkflow contract v${v.contract}\nTemporal TypeScript SDK ${v.temporalSdk}\n`,
      }),
    );
  });
  return withExamples(cmd, ['svm version', 'svm version -o json   # for tools']);
}
