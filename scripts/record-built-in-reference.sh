#!/usr/bin/env bash
# npm run reference:built-in [-- FILE...]: records Kubernetes' built-in StorageVersionMigration controller
# (kube-controller-manager's storage-version-migrator-controller) on tools/versions.json's releases, as the tests ran it
# when it was a live control, and rewrites test/fixtures/built-in-reference.json (test/helpers/built-in-reference.ts).
# The three files it runs with SVM_RECORD_BUILT_IN=1 run the built-in alone (svm's tests skip) and each writes its part:
#   test-conformance        the built-in's cases and status parity (v1) on `kubernetes`
#   test-standard-v1beta1   status parity (v1beta1) on `kubernetesPrevious` (builds its kube-controller-manager)
#   test-upgrade            the built-in alone through the rolling upgrade `kubernetesPrevious` -> `kubernetes`
# Run it when tools/versions.json moves a release (the suite fails until then, naming this command); look at the
# diff, and commit the file. Real servers, as npm test: root, and the tools built (scripts/tools.sh) or built here.
set -euo pipefail
cd "$(dirname "$0")/.."
files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
  files=(test/test-conformance.test.ts test/test-standard-v1beta1.test.ts test/test-upgrade.test.ts)
fi
SVM_RECORD_BUILT_IN=1 bash scripts/test.sh "${files[@]}"
git --no-pager diff --stat -- test/fixtures/built-in-reference.json || true
