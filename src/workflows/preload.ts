/**
 * What every workflow of a worker shares: the bundle loads this module once,
 * when the worker's reusable V8 context starts (the SDK's preloadModules, see
 * src/worker/workflow-bundle.ts), and zod with it, so a workflow run
 * (continue-as-new included) no longer evaluates zod again: ~3 MiB of its
 * classes per run, garbage in the workflow thread's heap once the run ends.
 *
 * The SDK deep-freezes what a preloaded module reaches, so zod must have done
 * here whatever it does once, lazily, into objects it exports: memoise
 * whether it may compile object parsers, install its default locale (on the
 * first check it builds), its methods on each schema type's prototype (on the
 * first schema of the type). A throwaway schema of every kind the contract
 * uses is built and made to parse, pass and fail; otherwise the first
 * workflow to do one of those would write to a frozen object. The contract's
 * own schemas stay per workflow (zod defines their methods lazily on each).
 * test-workflow-* and unit-replay run every workflow on a bundle built so.
 */
import { z } from 'zod';

function warmUp(): boolean {
  const base = z
    .object({
      s: z
        .string()
        .min(1)
        .max(9)
        .regex(/^[a-z]+$/),
      n: z.number().int().min(0).max(9).optional(),
      b: z.boolean().default(false),
      l: z.literal('x'),
      e: z.enum(['a', 'b']),
      a: z.array(z.string()).max(3),
      r: z.record(z.string(), z.number()),
      u: z.union([z.string(), z.number()]).nullable(),
      p: z.preprocess((v) => v, z.string()),
    })
    .strict()
    .describe('zod, warmed up');
  const schema = base
    .extend({ x: z.string().optional() })
    .omit({ x: true })
    .partial({ n: true })
    .refine((v) => v.s !== 'never', { message: 'never' })
    .superRefine((v, ctx) => {
      if (v.l !== 'x') ctx.addIssue({ code: 'custom', message: 'not x' });
    });
  const ok = schema.safeParse({ s: 'a', n: 1, l: 'x', e: 'a', a: [], r: {}, u: null, p: 'p' });
  const bad = schema.safeParse({ s: '', n: -1.5, b: 1, l: 'y', e: 'c', a: [1, 2, 3, 4], r: { k: 'v' }, u: {}, p: 2, q: 1 });
  return (
    ok.success && !bad.success && bad.error instanceof z.ZodError && bad.error.issues.length > 0 && z.util.allowsEval.value !== undefined
  );
}

/** True once zod has done its one-time work (see above). */
export const zodReady: boolean = warmUp();
