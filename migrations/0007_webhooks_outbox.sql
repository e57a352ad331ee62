CREATE TABLE `events` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`type` text NOT NULL,
	`resource` text NOT NULL,
	`resource_id` text NOT NULL,
	`snapshot` text NOT NULL,
	`created_at` integer NOT NULL,
	`dispatched_at` integer
);
--> statement-breakpoint
CREATE INDEX `events_workspace_id_idx` ON `events` (`workspace_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_workspace_type_id_idx` ON `events` (`workspace_id`,`type`,`id`);--> statement-breakpoint
CREATE INDEX `events_undispatched_idx` ON `events` (`created_at`) WHERE dispatched_at IS NULL;--> statement-breakpoint
CREATE TABLE `webhook_attempts` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`endpoint_id` text NOT NULL,
	`event_id` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`last_status_code` integer,
	`last_error` text,
	`next_attempt_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`endpoint_id`) REFERENCES `webhook_endpoints`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`event_id`) REFERENCES `events`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_attempts_endpoint_event_uq` ON `webhook_attempts` (`endpoint_id`,`event_id`);--> statement-breakpoint
CREATE INDEX `webhook_attempts_endpoint_id_idx` ON `webhook_attempts` (`endpoint_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_attempts_pending_idx` ON `webhook_attempts` (`next_attempt_at`) WHERE status = 'pending';--> statement-breakpoint
CREATE TABLE `webhook_endpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`url` text NOT NULL,
	`events` text NOT NULL,
	`description` text,
	`enabled` integer NOT NULL,
	`secret` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`deleted_at` integer,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhook_endpoints_workspace_id_idx` ON `webhook_endpoints` (`workspace_id`,`id`);--> statement-breakpoint
CREATE TABLE `write_marks` (
	`id` text PRIMARY KEY NOT NULL
);
