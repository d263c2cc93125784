/**
 * What every process's settings share: zod helpers for values read from the
 * environment, and the error that names the bad variable. The client and the
 * worker both load settings, so this sits below both (it imports no layer).
 */
import { z } from 'zod';

/** A setting that cannot be used: the process stops at start with this message. */
export class SettingsError extends Error {}

/** An environment-style boolean: true/false, 1/0, yes/no (or a real boolean from a flag). */
export const settingBool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no'])])
  .transform((v) => v === true || v === 'true' || v === '1' || v === 'yes');

/** One message naming every bad setting by its environment variable (sources: setting path -> variable). */
export function explainSettings(error: z.ZodError, sources: Record<string, string>): string {
  return error.issues
    .map((i) => {
      const key = i.path.join('.');
      return `${sources[key] ?? key} (${key}): ${i.message}`;
    })
    .join('; ');
}
