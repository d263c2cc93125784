/** Every workflow the worker registers. */
export { migrateResource } from './migrate-resource';
export { storageVersionTrigger } from './trigger';
export { migrateAll } from './migrate-all';
export { delegateToBuiltIn } from './delegate-to-built-in';
export { checkVersionDrop } from './check-version-drop';
export { rewriteManagedFields } from './rewrite-managed-fields';
export { clusterRegistration, clusterUidClaim } from './cluster-registration';
export { fleetCampaign } from './campaign';
export { clusterCampaignStep } from './campaign-step';
export { windowedCampaign } from './campaign-window';
export { campaignMember } from './campaign-member';
