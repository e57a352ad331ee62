// A subscriber's fields as a send reads them with its recipients (the fan-out's windows, a delivery
// chunk's rows): what its templates may say about them.

/** What a template may say about a subscriber, as the recipient queries select it. */
export type SubscriberFields = { name: string | null; tags: string[]; location: string | null; source: string | null };
export type SubscriberFieldsRow = { name: string | null; tags: string; location: string | null; source: string | null };
export const subscriberFields = (r: SubscriberFieldsRow): SubscriberFields => ({
  name: r.name,
  tags: JSON.parse(r.tags ?? "[]") as string[],
  location: r.location,
  source: r.source,
});
