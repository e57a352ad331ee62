CREATE TABLE `confirmation_messages` (
	`provider_message_id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`subscriber_id` text NOT NULL,
	`email` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `confirmation_messages_created_at_idx` ON `confirmation_messages` (`created_at`);