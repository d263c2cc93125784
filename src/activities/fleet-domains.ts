/**
 * The trust domains file's loader lives in src/config/fleet-domains.ts, where the fleet's worker and `svm fleet`
 * (which may not import activities) both read it; the fleet's activities take it from here.
 */
export { FleetDomains, FleetDomainsSchema, FLEET_DOMAINS_ENV, type Domain, type DomainConfig } from '../config/fleet-domains';
