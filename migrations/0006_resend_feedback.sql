CREATE TABLE `webhook_receipts` (
	`svix_id` text PRIMARY KEY NOT NULL,
	`event_type` text NOT NULL,
	`received_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `deliveries` ADD `bounce_type` text;--> statement-breakpoint
ALTER TABLE `deliveries` ADD `opened_at` integer;--> statement-breakpoint
ALTER TABLE `deliveries` ADD `clicked_at` integer;--> statement-breakpoint
CREATE INDEX `deliveries_provider_message_idx` ON `deliveries` (`provider_message_id`);