/**
 * Where one run of migrateResource is, as its steering messages see it: one mode at a time, each move a pure
 * function below (MigrationState holds the mode and calls them).
 *
 *   running    going on: waiting for agreement, or migrating chunk after chunk (the phase says which)
 *   paused     held until a resume: between chunks, mid-chunk, or before the verdict records anything. Asked
 *              while waiting for agreement, it holds from when the agreement comes
 *   aborting   an abort was asked for, with its reason: the run ends Aborted at its next step. `paused` is whether a
 *              pause holds as well: the abort's answer says so, and a run that starts over before it ends
 *              (agreement moved meanwhile) carries the pause, not the abort, into the next run
 *   recording  the verdict records the success: a pause or an abort can no longer apply (an update is refused); a
 *              signal's still moves `then`, the mode the run is back in should the record fail
 *   ended      the final phase is published
 *
 *   running --pause--> paused --resume--> running
 *   running | paused --abort--> aborting (a second abort: its reason)
 *   running | paused | aborting --startRecording--> recording --recordFailed--> its `then`
 *   any --end--> ended
 */

/** What a steering message can set: going on, held, or ending. */
export type Steering =
  { readonly is: 'running' } | { readonly is: 'paused' } | { readonly is: 'aborting'; readonly reason: string; readonly paused: boolean };

export type Mode = Steering | { readonly is: 'recording'; readonly then: Steering } | { readonly is: 'ended' };

const RUNNING: Steering = { is: 'running' };
const PAUSED: Steering = { is: 'paused' };
const ENDED: Mode = { is: 'ended' };

/** A run's first mode: paused when the run before it was (a pause holds across runs). */
export function firstMode(paused: boolean): Mode {
  return paused ? PAUSED : RUNNING;
}

/** A pause (held) or a resume (not held). */
export function withPause(mode: Mode, held: boolean): Mode {
  const steer = (s: Steering): Steering => (s.is === 'aborting' ? { ...s, paused: held } : held ? PAUSED : RUNNING);
  if (mode.is === 'ended') return mode;
  return mode.is === 'recording' ? { is: 'recording', then: steer(mode.then) } : steer(mode);
}

/** An abort, with its reason (a later one's reason replaces an earlier one's). */
export function withAbort(mode: Mode, reason: string): Mode {
  const steer = (s: Steering): Steering => ({ is: 'aborting', reason, paused: pauseHeld(s) });
  if (mode.is === 'ended') return mode;
  return mode.is === 'recording' ? { is: 'recording', then: steer(mode.then) } : steer(mode);
}

/** The verdict starts recording the success. */
export function startRecording(mode: Mode): Mode {
  if (mode.is === 'recording' || mode.is === 'ended') return mode;
  return { is: 'recording', then: mode };
}

/** The record failed: back to the mode the steering messages left meanwhile. */
export function recordFailed(mode: Mode): Mode {
  return mode.is === 'recording' ? mode.then : mode;
}

/** The final phase is published. */
export function end(): Mode {
  return ENDED;
}

/** The mode the steering messages set, under a recording. */
function steering(mode: Mode): Steering | undefined {
  if (mode.is === 'ended') return undefined;
  return mode.is === 'recording' ? mode.then : mode;
}

/** Does a pause hold (asked and not resumed since), whatever else the run is doing? */
export function pauseHeld(mode: Mode): boolean {
  const s = steering(mode);
  return s?.is === 'paused' || (s?.is === 'aborting' && s.paused);
}

/** Why an abort was asked for, if one was and the run has not ended. */
export function abortAsked(mode: Mode): string | undefined {
  const s = steering(mode);
  return s?.is === 'aborting' ? s.reason : undefined;
}
