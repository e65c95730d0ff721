/**
 * A webhook delivery to enqueue, as the queries that write deliveries return it.
 *
 * @module
 */

/** A delivery to enqueue: its id and redelivery generation. */
export interface WebhookDeliveryRef {
  id: string;
  projectId: string;
  generation: number;
}
