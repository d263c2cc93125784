/** The one workflow of the benches' empty Temporal worker (bench/lib/empty-worker.ts): it does nothing. */
export async function nothing(): Promise<void> {}
