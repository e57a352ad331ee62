ALTER TABLE `deliveries` ADD `first_asked_at` integer;--> statement-breakpoint
-- A batch asked before this column: its first request was made after its deliveries were created.
UPDATE `deliveries` SET `first_asked_at` = `created_at` WHERE `status` = 'queued' AND `asked_seq` > 0;
