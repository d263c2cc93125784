/**
 * The version of the workflow contract (docs/upgrade-tooling.md, contract/v1/*.schema.json):
 * what any Temporal SDK or the CLI may send and read. A change that breaks a caller needs a new version.
 */
export const CONTRACT_VERSION = '1';
