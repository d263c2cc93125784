/** Every workflow the worker registers. */
export { migrateResource } from './migrate-resource';
export { storageVersionTrigger } from './trigger';
