/** The test CRD and bulk object creation: src/dev/test-crd.ts, shared with bench/ and the demo. */
export * from '../../src/dev/test-crd';
