ALTER TABLE `deliveries` DROP COLUMN `asked`;--> statement-breakpoint
ALTER TABLE `deliveries` DROP COLUMN `dropped`;