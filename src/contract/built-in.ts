/**
 * What the deferring mode's activity answers its workflow (delegateToBuiltIn) about the built-in migrator's
 * standard object: its state, read from its conditions (src/activities/built-in.ts), and the built-in's own words.
 * Note: travels in workflow history, read back by workers of other versions: add fields, never change one.
 */
export type BuiltInState = 'pending' | 'running' | 'succeeded' | 'failed' | 'gone';

export interface BuiltInView {
  state: BuiltInState;
  /** The built-in's own words (its Running or Failed condition), for the progress message. */
  message?: string;
}
