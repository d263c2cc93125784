/** The pure parts of the plane's Temporal server on PostgreSQL (src/dev/temporal-server.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  checkSearchAttributesFitSql,
  newTemporalServerRecord,
  smallintPort,
  temporalServerConfig,
  translateTemporalArgs,
} from '../src/dev/temporal-server';

void test('the dev server flags the suite passes become dynamic config for temporal-server; others are refused', () => {
  const t = translateTemporalArgs([
    '--dynamic-config-value',
    'limit.historyCount.suggestContinueAsNew=300',
    '--dynamic-config-value=frontend.enableUpdateWorkflowExecution=true',
    '--dynamic-config-value',
    'some.key="text"',
    '--log-level',
    'error',
  ]);
  assert.deepEqual(t.dynamicConfig, {
    'limit.historyCount.suggestContinueAsNew': [{ value: 300 }],
    'frontend.enableUpdateWorkflowExecution': [{ value: true }],
    'some.key': [{ value: 'text' }],
  });
  assert.equal(t.logLevel, 'error');
  assert.equal(translateTemporalArgs([]).logLevel, 'warn');
  assert.throws(() => translateTemporalArgs(['--headless']), /--dynamic-config-value KEY=VALUE and --log-level/);
  assert.throws(() => translateTemporalArgs(['--dynamic-config-value', 'novalue']), /KEY=VALUE/);
});

void test("svm's search attributes fit SQL visibility; more of a type than it has columns is refused", () => {
  checkSearchAttributesFitSql();
  assert.throws(
    () => checkSearchAttributesFitSql(['A', 'B', 'C', 'D'].map((name) => ({ name, type: 'Int' }))),
    /4 Int search attributes; SQL visibility has 3/,
  );
});

void test('every port of the server is below 32768 (cluster_membership.rpc_port is a SMALLINT) and bound to 127.0.0.1', async () => {
  assert.ok((await smallintPort()) < 32768);
  const { frontendPort, ...rec } = await newTemporalServerRecord('/tmp/svm-unit');
  const ports = [frontendPort, ...Object.values(rec.ports)];
  assert.equal(new Set(ports).size, ports.length, 'distinct');
  assert.ok(
    ports.every((p) => p > 1024 && p < 32768),
    ports.join(','),
  );
  const cfg = temporalServerConfig({ frontendPort, rec, password: 'pw', logLevel: 'warn' }) as {
    persistence: { datastores: Record<string, { sql: { pluginName: string; databaseName: string; connectAddr: string } }> };
    services: Record<string, { rpc: { grpcPort: number; bindOnIP: string } }>;
  };
  assert.deepEqual(
    Object.values(cfg.persistence.datastores).map((d) => [d.sql.pluginName, d.sql.databaseName]),
    [
      ['postgres12', 'temporal'],
      ['postgres12', 'temporal_visibility'],
    ],
  );
  assert.equal(cfg.services.frontend!.rpc.grpcPort, frontendPort);
  assert.ok(Object.values(cfg.services).every((s) => s.rpc.bindOnIP === '127.0.0.1'));
});
