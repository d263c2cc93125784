/**
 * List-then-watch, forever, until stopped: the informer loop of this project.
 * On any error or end of the watch it lists again (onList gets the full list)
 * and watches from that list's resourceVersion. Survives API server restarts.
 */
import { Watch } from './kubeconfig';
import type { KubeClient } from './client';

export interface WatchHandlers {
  onList(items: unknown[]): void;
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: unknown): void;
  onError(err: unknown): void;
}

export function watchForever(
  kube: KubeClient,
  path: string,
  handlers: WatchHandlers,
  query: Record<string, string> = {},
): { stop(): void } {
  let stopped = false;
  let controller: AbortController | undefined;
  const loop = async () => {
    while (!stopped) {
      try {
        const list = await kube.getJson<{ metadata: { resourceVersion: string }; items: unknown[] }>(path, query);
        handlers.onList(list.items);
        await new Promise<void>((resolve) => {
          void new Watch(kube.kubeConfig)
            .watch(
              path,
              { ...query, resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true },
              (type, obj) => {
                if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') handlers.onEvent(type, obj);
              },
              (err: unknown) => {
                // A watch ends normally now and then (timeouts); an error (e.g. 403) is reported.
                if (err && !stopped && !(err instanceof Error && err.name === 'AbortError')) handlers.onError(err);
                resolve();
              },
            )
            .then(
              (c) => {
                controller = c;
                if (stopped) c.abort();
              },
              (err: unknown) => {
                if (!stopped) handlers.onError(err);
                resolve();
              },
            );
        });
      } catch (err) {
        if (!stopped) handlers.onError(err);
      }
      if (!stopped) await new Promise((r) => setTimeout(r, 1000));
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
