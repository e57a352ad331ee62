ALTER TABLE `campaigns` ADD `html` text;--> statement-breakpoint
ALTER TABLE `campaigns` ADD `text` text;--> statement-breakpoint
ALTER TABLE `newsletters` ADD `address` text;