/** The integrations a send may name (`integration_slug`); which are configured depends on the deployment. */
export const integrationSlugs = ["sandbox", "resend"] as const;
export type IntegrationSlug = (typeof integrationSlugs)[number];

export const isIntegrationSlug = (slug: string): slug is IntegrationSlug => (integrationSlugs as readonly string[]).includes(slug);
