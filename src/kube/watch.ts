/**
 * List-then-watch, forever, until stopped: the informer loop of this project.
 * On any error or end of the watch it lists again (onList gets the full list)
 * and watches from that list's resourceVersion. Survives API server restarts.
 * A watch refused with 429 (API Priority and Fairness: the priority level is
 * busy) is not an error: it is tried again after THROTTLED_PAUSE_MS, quietly
 * (the API server counts it in apiserver_flowcontrol_rejected_requests_total).
 */
import { Watch } from './kubeconfig';
import type { KubeClient } from './client';
import { sleep } from './rate-limit';

export interface WatchHandlers {
  onList(items: unknown[]): void;
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: unknown): void;
  onError(err: unknown): void;
}

/**
 * The pause before watching again after an error, and after a 429 (longer: the server asked for less). Note: the
 * loop's own pace, not a retry that gives up (retryDelayMs): the list is a request(), sent again as that decides.
 */
const PAUSE_MS = 1000;
const THROTTLED_PAUSE_MS = 5000;

/** A request refused with 429 Too Many Requests: the watch (client-node's statusCode) or the list (KubeError's status). */
export function throttled(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { statusCode?: unknown; status?: unknown };
  return e.statusCode === 429 || e.status === 429;
}

export function watchForever(
  kube: KubeClient,
  path: string,
  handlers: WatchHandlers,
  query: Record<string, string> = {},
): { stop(): void } {
  let stopped = false;
  let controller: AbortController | undefined;
  let pause = PAUSE_MS;
  const report = (err: unknown) => {
    if (stopped) return;
    if (throttled(err)) pause = THROTTLED_PAUSE_MS;
    else handlers.onError(err);
  };
  const started = (c: AbortController) => {
    controller = c;
    if (stopped) c.abort();
  };
  const loop = async () => {
    while (!stopped) {
      pause = PAUSE_MS;
      try {
        const list = await kube.getJson<{ metadata: { resourceVersion: string }; items: unknown[] }>(path, query);
        handlers.onList(list.items);
        const from = { ...query, resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true };
        await watchUntilEnd(kube, path, from, handlers, { report, started });
      } catch (err) {
        report(err);
      }
      if (!stopped) await sleep(pause);
    }
  };
  void loop();
  return {
    stop() {
      stopped = true;
      controller?.abort();
    },
  };
}

/** One watch: resolves once it ends, normally (now and then: timeouts) or with an error, which is reported. */
function watchUntilEnd(
  kube: KubeClient,
  path: string,
  query: Record<string, string | boolean>,
  handlers: WatchHandlers,
  on: { report(err: unknown): void; started(c: AbortController): void },
): Promise<void> {
  return new Promise<void>((resolve) => {
    void new Watch(kube.kubeConfig)
      .watch(
        path,
        query,
        (type, obj) => {
          if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') handlers.onEvent(type, obj);
        },
        (err: unknown) => {
          // A watch ends normally now and then (timeouts); an error (e.g. 403) is reported.
          if (err && !(err instanceof Error && err.name === 'AbortError')) on.report(err);
          resolve();
        },
      )
      .then(on.started, (err: unknown) => {
        on.report(err);
        resolve();
      });
  });
}
