/**
 * A promise that rejects with `message` (or the error it makes) when `p` has not settled within `ms`. The one timeout every caller
 * shares (the bridge's queries, the trigger's and the agreement's reads of each API server at its own address).
 * The timer is cleared either way, so nothing keeps the process alive after `p` settles.
 */
export async function withTimeout<T>(p: Promise<T>, ms: number, message: string | (() => Error)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(typeof message === 'string' ? new Error(message) : message()), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
