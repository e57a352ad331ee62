CREATE TABLE `campaigns` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`newsletter_id` text NOT NULL,
	`segment_id` text,
	`subject` text NOT NULL,
	`preheader` text,
	`status` text NOT NULL,
	`scheduled_at` integer,
	`sent_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`newsletter_id`) REFERENCES `newsletters`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`segment_id`) REFERENCES `segments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `campaigns_workspace_id_idx` ON `campaigns` (`workspace_id`,`id`);--> statement-breakpoint
CREATE INDEX `campaigns_workspace_status_id_idx` ON `campaigns` (`workspace_id`,`status`,`id`);--> statement-breakpoint
CREATE TABLE `credential_workspaces` (
	`credential_id` text NOT NULL,
	`workspace_id` text NOT NULL,
	PRIMARY KEY(`credential_id`, `workspace_id`),
	FOREIGN KEY (`credential_id`) REFERENCES `credentials`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `credentials` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text,
	`mode` text NOT NULL,
	`token_hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `credentials_token_hash_uq` ON `credentials` (`token_hash`);--> statement-breakpoint
CREATE TABLE `deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`campaign_id` text NOT NULL,
	`operation_id` text NOT NULL,
	`subscriber_id` text NOT NULL,
	`email` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`provider_message_id` text,
	`error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`campaign_id`) REFERENCES `campaigns`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`operation_id`) REFERENCES `operations`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`subscriber_id`) REFERENCES `subscribers`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deliveries_campaign_subscriber_uq` ON `deliveries` (`campaign_id`,`subscriber_id`);--> statement-breakpoint
CREATE INDEX `deliveries_campaign_id_idx` ON `deliveries` (`campaign_id`,`id`);--> statement-breakpoint
CREATE INDEX `deliveries_operation_status_idx` ON `deliveries` (`operation_id`,`status`);--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`credential_id` text NOT NULL,
	`key` text NOT NULL,
	`fingerprint` text NOT NULL,
	`state` text NOT NULL,
	`locked_until` integer NOT NULL,
	`response` text,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`credential_id`, `key`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_expires_idx` ON `idempotency_keys` (`expires_at`);--> statement-breakpoint
CREATE TABLE `newsletters` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`name` text NOT NULL,
	`from_name` text,
	`from_email` text NOT NULL,
	`reply_to` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `newsletters_workspace_id_idx` ON `newsletters` (`workspace_id`,`id`);--> statement-breakpoint
CREATE TABLE `operations` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`campaign_id` text NOT NULL,
	`type` text NOT NULL,
	`status` text NOT NULL,
	`integration_slug` text NOT NULL,
	`delivery_integration` text NOT NULL,
	`mode` text NOT NULL,
	`total` integer DEFAULT 0 NOT NULL,
	`delivered` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`fanout_cursor` text,
	`fanout_done` integer DEFAULT false NOT NULL,
	`start_at` integer,
	`error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`completed_at` integer,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`campaign_id`) REFERENCES `campaigns`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `operations_campaign_idx` ON `operations` (`campaign_id`);--> statement-breakpoint
CREATE INDEX `operations_status_start_idx` ON `operations` (`status`,`start_at`);--> statement-breakpoint
CREATE TABLE `segments` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`name` text NOT NULL,
	`filter` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `segments_workspace_id_idx` ON `segments` (`workspace_id`,`id`);--> statement-breakpoint
CREATE TABLE `subscriber_tags` (
	`workspace_id` text NOT NULL,
	`tag` text NOT NULL,
	`subscriber_id` text NOT NULL,
	PRIMARY KEY(`workspace_id`, `tag`, `subscriber_id`),
	FOREIGN KEY (`subscriber_id`) REFERENCES `subscribers`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `subscriber_tags_subscriber_idx` ON `subscriber_tags` (`subscriber_id`);--> statement-breakpoint
CREATE TABLE `subscribers` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`email` text NOT NULL,
	`email_key` text NOT NULL,
	`name` text,
	`status` text NOT NULL,
	`tags` text NOT NULL,
	`location` text,
	`source` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `subscribers_workspace_email_uq` ON `subscribers` (`workspace_id`,`email_key`);--> statement-breakpoint
CREATE INDEX `subscribers_workspace_id_idx` ON `subscribers` (`workspace_id`,`id`);--> statement-breakpoint
CREATE INDEX `subscribers_workspace_status_id_idx` ON `subscribers` (`workspace_id`,`status`,`id`);--> statement-breakpoint
CREATE TABLE `workspaces` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL
);
