/**
 * What the planes' Temporal servers set beyond their defaults, shared by the dev server and temporal-server (and
 * written out in docker-compose.yml): two settings that take a migration's steps from about 100 ms to about 15 ms
 * each on this machine (docs/benchmarks.md, "A step of a migration").
 */

/**
 * Eager activity dispatch, which the Temporal server leaves off by default: an activity scheduled by a workflow task
 * goes back to the worker in the answer to that task's completion, not through the task queue. Each step of a
 * migration (a chunk, an agreement check, a status write) then starts about 45 ms sooner on this machine's servers
 * (docs/benchmarks.md); a run of 5000 objects has about a dozen such steps. Both planes' servers and
 * docker-compose.yml turn it on; docs/temporal-server.md recommends it for a server of one's own.
 */
export const EAGER_ACTIVITIES = 'system.enableActivityEagerExecution';

/**
 * How often each history shard may load new transfer tasks (a workflow task, an activity not dispatched eagerly):
 * the server's default, 20 a second per shard with a burst of 20, made every step of one workflow wait up to 50 ms
 * for its turn once the burst was spent (go.temporal.io/server service/history/queues/reader.go: each load waits on
 * that limiter; history.transferProcessorMaxPollRPS). The dev server has a single shard, docker-compose.yml's server
 * four; a migration is one workflow, on one shard. 1000 lets each step's task load at once on these small local
 * servers; the limiter stays (it guards the database when many shards reload at once).
 */
export const TRANSFER_POLL_RPS = 'history.transferProcessorMaxPollRPS';
export const TRANSFER_POLL_RPS_VALUE = 1000;

/**
 * The dev server turns this on (the CLI's defaults, temporalcli/commands.server.go), temporal-server leaves it off:
 * every workflow start then reads its namespace from SQLite, and a read that fails or takes over 3 s is answered
 * "Namespace default is not found" (go.temporal.io/server common/namespace/nsregistry/registry.go,
 * getNamespaceByNamePersistence). On a loaded machine one start in a CI run got that answer. svm's search
 * attributes are in the dev server's namespace from its first start (--search-attribute), so nothing needs the
 * forced read; a namespace whose search attributes `svm setup` adds later sees them within the namespace cache's
 * refresh (2 s), as on temporal-server.
 */
export const FORCE_SEARCH_ATTRIBUTE_READ = 'system.forceSearchAttributesCacheRefreshOnRead';

/** The dev server's flags for the same dynamic config as far as it differs from the dev server's own defaults. */
export function devServerDynamicConfigArgs(): string[] {
  return [
    '--dynamic-config-value',
    `${EAGER_ACTIVITIES}=true`,
    '--dynamic-config-value',
    `${TRANSFER_POLL_RPS}=${TRANSFER_POLL_RPS_VALUE}`,
    '--dynamic-config-value',
    `${FORCE_SEARCH_ATTRIBUTE_READ}=false`,
  ];
}
