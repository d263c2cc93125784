/** What a cluster's name may be (no imports: the CLI checks `--cluster` with it before loading anything). */

/** A DNS label, as Cluster API, Gardener and kubeconfig contexts name clusters: at most 63 characters. */
export const CLUSTER_NAME_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const CLUSTER_NAME_RULE = 'a cluster name is a DNS label: lower-case letters, digits and "-", at most 63';

/** A campaign's name (its workflow is svm-campaign/<name>): a DNS label that may also hold dots (to-1.37). */
export const CAMPAIGN_NAME_PATTERN = /^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/;
export const CAMPAIGN_NAME_RULE = 'a campaign name is lower-case letters, digits, "-" and ".", at most 63';
