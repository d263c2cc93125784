/** What a cluster's name may be (no imports: the CLI checks `--cluster` with it before loading anything). */

/** A DNS label, as Cluster API, Gardener and kubeconfig contexts name clusters: at most 63 characters. */
export const CLUSTER_NAME_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const CLUSTER_NAME_RULE = 'a cluster name is a DNS label: lower-case letters, digits and "-", at most 63';
