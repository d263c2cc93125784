/** Worker Versioning settings and the rule by which a worker makes its own version Current (src/worker/versioning.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { gitRevision, stampedRevision, svmBuild } from '../src/config/build-info';
import * as workflows from '../src/workflows';
import { versionInfo } from '../src/client/cli-version';
import { loadWorkerSettings, SettingsError } from '../src/worker/config';
import { pino } from 'pino';
import { getEventListeners } from 'node:events';
import { defaultBuildId, promotionDecision, watchCurrentVersion, workerDeploymentOptions } from '../src/worker/versioning';

const env = { TEMPORAL_ADDRESS: 'localhost:7233' };

void test('unversioned unless TEMPORAL_DEPLOYMENT_NAME is set', () => {
  const s = loadWorkerSettings(env);
  assert.equal(s.versioning.deploymentName, undefined);
  assert.equal(s.versioning.promote, false);
  assert.equal(
    workerDeploymentOptions(s.versioning, () => assert.fail('no build ID needed')),
    undefined,
  );
});

void test("a deployment name makes a versioned worker: AUTO_UPGRADE by default, build ID svm's <version>-<revision> unless TEMPORAL_WORKER_BUILD_ID", () => {
  const s = loadWorkerSettings({ ...env, TEMPORAL_DEPLOYMENT_NAME: 'svm-worker', SVM_PROMOTE_VERSION: 'true' });
  assert.equal(s.versioning.promote, true);
  const v = versionInfo();
  assert.deepEqual(
    workerDeploymentOptions(s.versioning, () => svmBuild()),
    {
      version: { deploymentName: 'svm-worker', buildId: `${v.svm}-${v.revision}` },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'AUTO_UPGRADE',
    },
  );
  assert.equal(defaultBuildId({ version: '1.2.3', revision: 'abc1234' }), '1.2.3-abc1234');
  const set = loadWorkerSettings({ ...env, TEMPORAL_DEPLOYMENT_NAME: 'svm-worker', TEMPORAL_WORKER_BUILD_ID: 'svm-worker-7d9f8c' });
  assert.equal(workerDeploymentOptions(set.versioning, () => svmBuild())?.version.buildId, 'svm-worker-7d9f8c');
});

void test('bad versioning settings are refused by name', () => {
  assert.throws(
    () => loadWorkerSettings({ ...env, TEMPORAL_DEPLOYMENT_NAME: 'svm.worker' }),
    (e: Error) => {
      assert.ok(e instanceof SettingsError);
      assert.match(e.message, /TEMPORAL_DEPLOYMENT_NAME/);
      return true;
    },
  );
  assert.throws(() => loadWorkerSettings({ ...env, TEMPORAL_WORKER_BUILD_ID: 'a b' }), /TEMPORAL_WORKER_BUILD_ID/);
  assert.throws(() => loadWorkerSettings({ ...env, SVM_PROMOTE_VERSION: 'perhaps' }), /SVM_PROMOTE_VERSION/);
  assert.throws(() => loadWorkerSettings({ ...env, SVM_VERSION_CHECK_SECONDS: '0' }), /SVM_VERSION_CHECK_SECONDS/);
  assert.equal(loadWorkerSettings(env).versioning.checkSeconds, 30);
  assert.equal(loadWorkerSettings({ ...env, SVM_VERSION_CHECK_SECONDS: '5' }).versioning.checkSeconds, 5);
});

void test('promotion: the newest version takes over; an older one (a restarted pod of the old ReplicaSet) does not take it back', () => {
  const versions = [
    { buildId: 'n', createdAt: 1000 },
    { buildId: 'n1', createdAt: 2000 },
  ];
  assert.equal(promotionDecision({ versions: [] }, 'n'), 'wait', 'pollers not seen yet');
  assert.equal(promotionDecision({ versions: [versions[0]!] }, 'n'), 'yes', 'first version, none Current');
  assert.equal(promotionDecision({ current: 'n', versions }, 'n1'), 'yes', 'the new ReplicaSet');
  assert.equal(promotionDecision({ current: 'n1', versions }, 'n1'), 'current');
  assert.equal(promotionDecision({ current: 'n1', versions }, 'n'), 'older');
  assert.equal(promotionDecision({ versions }, 'n'), 'older', 'even with none Current, the newest wins');
});

void test('every workflow type runs AUTO_UPGRADE through the worker default, none pinned (the replay fixtures guard them all); no type sets a behaviour of its own, which unversioned workers would send too', () => {
  const types = Object.entries(workflows as Record<string, unknown>).filter(([, v]) => typeof v === 'function');
  assert.deepEqual(types.map(([k]) => k).sort(), [
    'campaignMember',
    'checkVersionDrop',
    'clusterCampaignStep',
    'clusterRegistration',
    'clusterUidClaim',
    'delegateToBuiltIn',
    'fleetCampaign',
    'migrateAll',
    'migrateResource',
    'rewriteManagedFields',
    'storageVersionTrigger',
    'windowedCampaign',
  ]);
  for (const [name, fn] of types)
    assert.equal(
      (fn as { workflowDefinitionOptions?: { versioningBehavior?: string } }).workflowDefinitionOptions?.versioningBehavior,
      undefined,
      name,
    );
  const s = loadWorkerSettings({ ...env, TEMPORAL_DEPLOYMENT_NAME: 'svm-worker' });
  assert.equal(workerDeploymentOptions(s.versioning, () => svmBuild())?.defaultVersioningBehavior, 'AUTO_UPGRADE');
});

void test('the revision of an image without git: what its build wrote to dist/revision; SVM_GIT_REVISION first', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-rev-'));
  try {
    // Not a git checkout (a temporary directory: git fails there), no stamp: unknown.
    assert.equal(stampedRevision(root), undefined);
    assert.equal(gitRevision(root, {}), 'unknown');
    fs.mkdirSync(path.join(root, 'dist'));
    fs.writeFileSync(path.join(root, 'dist', 'revision'), 'c0123456789ab\n');
    assert.equal(gitRevision(root, {}), 'c0123456789ab');
    assert.equal(gitRevision(root, { SVM_GIT_REVISION: 'abc1234' }), 'abc1234');
    fs.writeFileSync(path.join(root, 'dist', 'revision'), 'two words\n');
    assert.equal(stampedRevision(root), undefined, 'not a revision');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

void test('watchCurrentVersion keeps no abort listener per check: the listeners on its signal stay bounded while it runs', async () => {
  let reads = 0;
  const client = {
    options: { namespace: 'default' },
    workflowService: {
      describeWorkerDeployment: async () => {
        reads++;
        return { workerDeploymentInfo: { routingConfig: { currentDeploymentVersion: { buildId: 'one' } }, versionSummaries: [] } };
      },
    },
  };
  const stop = new AbortController();
  const seen: Array<string | undefined> = [];
  const done = watchCurrentVersion({
    client: client as never,
    deploymentName: 'd',
    intervalMs: 1,
    report: (v) => seen.push(v),
    log: pino({ level: 'silent' }),
    signal: stop.signal,
  });
  while (reads < 50) await new Promise((r) => setTimeout(r, 5));
  assert.ok(
    getEventListeners(stop.signal, 'abort').length <= 1,
    `${getEventListeners(stop.signal, 'abort').length} abort listeners after ${reads} checks`,
  );
  stop.abort();
  await done;
  assert.equal(seen.at(-1), 'one');
});
