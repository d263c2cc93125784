/** compareStrings: code-unit order, where localeCompare (ICU collation) orders otherwise. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compareStrings } from '../src/api/order';

void test('compareStrings orders by code unit, not by collation', () => {
  assert.ok(compareStrings('B', 'a') < 0); // 'B' (0x42) before 'a'; collation puts a before B
  assert.ok(compareStrings('x_y', 'x-y') > 0); // '_' (0x5f) after '-'; collation puts _ first
  assert.equal(compareStrings('fd00::1', 'fd00::1'), 0);
  assert.deepEqual(['b', 'a.example', 'A', 'a-b', 'a_b', 'a'].sort(compareStrings), ['A', 'a', 'a-b', 'a.example', 'a_b', 'b']);
  // Kubernetes names sort the same either way: what recorded workflow histories rely on.
  const names = ['widgets.example.com', 'widgets2.example.com', 'kube-apiserver-2', 'kube-apiserver-10', 'a.b-c.d'];
  assert.deepEqual(
    [...names].sort(compareStrings),
    [...names].sort((a, b) => a.localeCompare(b)),
  );
});
