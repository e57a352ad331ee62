ALTER TABLE `deliveries` ADD `asked_seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- A row in the latest request of its batch numbers after one left out of it (dropped); never asked: 0.
UPDATE `deliveries` SET `asked_seq` = CASE WHEN `asked` = 1 THEN 2 WHEN `dropped` = 1 THEN 1 ELSE 0 END WHERE `status` = 'queued';
