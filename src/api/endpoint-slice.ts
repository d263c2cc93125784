/**
 * discovery.k8s.io/v1 EndpointSlice, the parts that say where the API
 * servers are (the `kubernetes` Service's slices in `default`). The API
 * server writes null for unset optional fields: nullish throughout.
 */
import { z } from 'zod';

export const EndpointSlice = z
  .object({
    metadata: z.object({ name: z.string() }).loose(),
    addressType: z.string().nullish(),
    endpoints: z
      .array(
        z
          .object({
            addresses: z.array(z.string()).nullish(),
            conditions: z.object({ ready: z.boolean().nullish(), terminating: z.boolean().nullish() }).loose().nullish(),
          })
          .loose(),
      )
      .nullish(),
    ports: z
      .array(z.object({ name: z.string().nullish(), port: z.number().int().nullish(), protocol: z.string().nullish() }).loose())
      .nullish(),
  })
  .loose();
export type EndpointSlice = z.infer<typeof EndpointSlice>;
