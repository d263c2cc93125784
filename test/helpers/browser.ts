/**
 * Headless Chromium for tests that look at a web page as a person would
 * (the Temporal Web UI). It is Debian's chromium (npm test's preflight, scripts/preflight.ts,
 * installs it), driven by playwright-core, which never downloads a browser.
 * Every launch gets a fresh, throw-away profile.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  browser: Browser;
  /** A new tab in its own context (cookies, storage) at the given viewport. */
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
  close(): Promise<void>;
}

/**
 * Launches Debian's chromium headless; fails with a clear message when it is missing.
 * playwright gives every launch a fresh user data dir of its own (a temporary
 * directory it deletes on close), so nothing leaks from one run to the next.
 */
export async function launchBrowser(opts: { viewport?: { width: number; height: number } } = {}): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`${CHROMIUM_PATH} is missing: install Debian's chromium (apt-get install chromium; npm test as root installs it)`);
  }
  const viewport = opts.viewport ?? { width: 1400, height: 900 };
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
  const contexts: BrowserContext[] = [];
  return {
    browser,
    async newPage(vp = viewport) {
      const context = await browser.newContext({ viewport: vp });
      contexts.push(context);
      return context.newPage();
    },
    async close() {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser.close().catch(() => undefined);
    },
  };
}
