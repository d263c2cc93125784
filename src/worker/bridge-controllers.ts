/**
 * The bridge's word about other controllers (own mode, SVM_STANDARD_MIGRATIONS=own): when another controller writes an
 * object svm acts on, when svm leaves one to it, when svm waits for it on a new one; each said once per object (log,
 * metric, an Event on the object). bridge-decision.ts decides which; this says it.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client';
import type { ObjectView } from '../kube/migration-objects';
import { LEFT_TO_BUILT_IN as LEFT_TO_BUILT_IN_REASON, WAITING_FOR_BUILT_IN as WAITING_FOR_BUILT_IN_REASON } from '../contract/reasons';
import { OWN_TAKE_AFTER_MS, takeAfterText } from './bridge-decision';
import { postEvent } from './unattended';

/** The reasons of the Events on a standard object svm leaves to another controller, or waits on (own mode): src/contract/reasons.ts. */
export { LEFT_TO_BUILT_IN_REASON, WAITING_FOR_BUILT_IN_REASON };

/**
 * Own mode: for this long after another controller (the built-in migrator) was last seen writing a standard
 * object's status, svm gives each new object OWN_TAKE_AFTER_MS from its creation for that controller to write it
 * first, and takes it then if none did.
 */
export const BUILT_IN_QUIET_MS = 10 * 60_000;

/** Another controller seen acting on a standard object: when (its last status write), on which, and who. */
export interface BuiltInSeen {
  at: number;
  name: string;
  writers: string[];
}

export interface OtherControllersOptions {
  kube: KubeClient;
  log: Logger;
  /** The API the bridge serves (its kind goes into the log). */
  api: 'sigs' | 'standard';
  onSharedObject?: (name: string, writers: string[]) => void;
  onLeftToBuiltIn?: (name: string) => void;
  /** Where the Events about standard objects go: default. */
  eventNamespace?: string;
  /** How long from its creation a new object is left to another controller (SVM_OWN_TAKE_AFTER_SECONDS): said in the Event. */
  ownTakeAfterMs?: number;
  /** Looks at the object again (the bridge's queue). */
  recheck: (obj: ObjectView) => void;
}

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** What the bridge has said about other controllers, so that each thing is said once per object. */
export class OtherControllers {
  /** Objects already reported as acted on by another controller (uid), so the log says it once. */
  private readonly reported = new Set<string>();
  /** Unattached standard objects already left to another controller (uid), so the log and the Event say it once. */
  private readonly objectsLeftToBuiltIn = new Set<string>();
  /** New standard objects svm waits on (uid): said once, and one look scheduled at a time. */
  private readonly waiting = new Set<string>();

  constructor(private readonly opts: OtherControllersOptions) {}

  /** The object is no longer waited on (taken, or left to the other controller). */
  stopWaiting(key: string): void {
    this.waiting.delete(key);
  }

  /** Another controller writes the status of this object: said once per object, and counted. */
  reportShared(obj: ObjectView, what?: string): void {
    const key = obj.uid ?? obj.name;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.opts.onSharedObject?.(obj.name, obj.otherWriters);
    this.opts.log.error(
      { name: obj.name, writers: obj.otherWriters, api: this.opts.api },
      what ??
        `another controller (${obj.otherWriters.join(', ') || 'unknown'}) writes the status of a StorageVersionMigration svm acts on: turn the built-in migrator off (kube-controller-manager --controllers=*,-storage-version-migrator-controller) or run svm with SVM_STANDARD_MIGRATIONS=defer`,
    );
  }

  /** An Event on a standard object (cluster-scoped: its Events live in eventNamespace), where `kubectl describe` shows it. */
  private event(obj: ObjectView, message: string, reason: string): void {
    void postEvent(
      this.opts.kube,
      this.opts.eventNamespace ?? 'default',
      { metadata: { name: obj.name, uid: obj.uid } },
      message,
      reason,
    ).catch((err: unknown) => this.opts.log.warn({ name: obj.name, err: errText(err) }, 'could not record the Event'));
  }

  /** Own mode: an unattached object another controller wrote first is its; said once per object (log, metric, Event). */
  leaveToOtherController(obj: ObjectView): void {
    const key = obj.uid ?? obj.name;
    if (this.objectsLeftToBuiltIn.has(key)) return;
    this.objectsLeftToBuiltIn.add(key);
    this.opts.onLeftToBuiltIn?.(obj.name);
    const writers = obj.otherWriters.join(', ') || 'unknown';
    const at = obj.lastOtherWrite === undefined ? '' : ` (last at ${new Date(obj.lastOtherWrite).toISOString()})`;
    this.event(
      obj,
      `svm leaves this object to another controller (${writers}), which wrote its status first${at}: svm (SVM_STANDARD_MIGRATIONS=own) never acts on an object another controller runs. ` +
        `If that controller is the built-in migrator, turn it off (kube-controller-manager --controllers=...,-storage-version-migrator-controller) or run svm with SVM_STANDARD_MIGRATIONS=defer`,
      LEFT_TO_BUILT_IN_REASON,
    );
  }

  /**
   * Own mode, the built-in seen acting lately: a new object nobody wrote yet is taken at takeAt unless another
   * controller writes it first; said once per object (log, Event), and looked at again then.
   */
  waitForOtherController(obj: ObjectView, takeAt: number, afterMs: number, seen: BuiltInSeen | undefined): void {
    const key = obj.uid ?? obj.name;
    if (this.waiting.has(key)) return;
    this.waiting.add(key);
    // A second past it: the look then finds it old enough (the resync every 30 s looks too).
    setTimeout(() => {
      this.waiting.delete(key);
      this.opts.recheck(obj);
    }, afterMs + 1000).unref();
    const when = new Date(takeAt).toISOString();
    const who = seen
      ? `another controller (${seen.writers.join(', ') || 'unknown'}) acted on StorageVersionMigration ${seen.name} at ${new Date(seen.at).toISOString()}`
      : 'another controller acted lately';
    this.event(
      obj,
      `svm (SVM_STANDARD_MIGRATIONS=own) takes this object at ${when}, ${takeAfterText(this.opts.ownTakeAfterMs ?? OWN_TAKE_AFTER_MS)} after its creation, unless another controller writes its status first: ${who}, so the built-in migrator may still run in this cluster`,
      WAITING_FOR_BUILT_IN_REASON,
    );
    this.opts.log.warn(
      {
        name: obj.name,
        takeAt: when,
        ...(seen ? { seenOn: seen.name, writers: seen.writers, seenAt: new Date(seen.at).toISOString() } : {}),
      },
      `waiting before taking StorageVersionMigration ${obj.name}: ${who}; svm takes it at ${when} unless another controller writes it first (turn the built-in migrator off: kube-controller-manager --controllers=...,-storage-version-migrator-controller)`,
    );
  }
}
