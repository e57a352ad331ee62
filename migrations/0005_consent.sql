ALTER TABLE `deliveries` ADD `unsubscribed_at` integer;--> statement-breakpoint
ALTER TABLE `subscribers` ADD `status_source` text;