/**
 * The built-in's recorded reference (test/fixtures/built-in-reference.json, test/helpers/built-in-reference.ts): every
 * part there, each recorded on the releases tools/versions.json names, or the suite fails here, in its unit phase,
 * with the command that records it again; and what the staleness check says for a reference of an older release.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kubeVersions } from '../src/dev/tools';
import { compareReleases, readReferenceFile, REFRESH_COMMAND, staleness, type BuiltInReference } from './helpers/built-in-reference';

void test("the built-in's reference holds every part, recorded on tools/versions.json's releases", () => {
  const ref = readReferenceFile();
  for (const part of ['conformance', 'v1beta1', 'upgrade'] as const) {
    const why = staleness(ref, part);
    assert.ok(!why, why);
  }
  // What the tests compare svm against is there: the cases' verdicts and the parity outcomes of both APIs.
  assert.deepEqual(Object.keys(ref.conformance!.cases).sort(), ['brokenWebhook', 'concurrent', 'conversion', 'secrets']);
  for (const parity of [ref.conformance!.parity, ref.v1beta1!.parity])
    assert.deepEqual(Object.keys(parity).sort(), ['denied', 'missing', 'success']);
  assert.ok(ref.upgrade!.changed.length > 0);
});

void test('a reference recorded on an older release fails with the command to run; a missing part too', () => {
  const versions = { current: 'v1.38.0', previous: 'v1.37.2' };
  const ref: BuiltInReference = {
    about: '',
    conformance: {
      kubernetes: 'v1.37.2',
      recordedAt: '2026-12-07T00:00:00Z',
      cases: {},
      rows: [],
      parity: { success: {}, denied: {}, missing: {} },
    },
    v1beta1: { kubernetes: 'v1.37.2', recordedAt: '2026-12-07T00:00:00Z', parity: { success: {}, denied: {}, missing: {} } },
  };
  const why = staleness(ref, 'conformance', versions);
  assert.match(why ?? '', /recorded on Kubernetes v1\.37\.2, older than tools\/versions\.json's kubernetes v1\.38\.0/);
  assert.ok(why?.includes(`run \`${REFRESH_COMMAND}\``), why);
  assert.equal(staleness(ref, 'v1beta1', versions), undefined, 'the 1.36 parts follow kubernetesPrevious');
  assert.match(staleness(ref, 'upgrade', versions) ?? '', /has no upgrade part .*npm run reference:built-in/);
  assert.match(
    staleness(ref, 'v1beta1', { current: 'v1.39.0', previous: 'v1.38.1' }) ?? '',
    /v1\.37\.2, older than tools\/versions\.json's kubernetesPrevious v1\.38\.1/,
  );
  assert.equal(compareReleases('v1.37.2', 'v1.37.10'), -1);
  assert.equal(compareReleases(kubeVersions().current, kubeVersions().current), 0);
});
