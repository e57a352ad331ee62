CREATE TABLE `service_keys` (
	`name` text PRIMARY KEY NOT NULL,
	`secret` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_idempotency_keys` (
	`credential_id` text NOT NULL,
	`key` text NOT NULL,
	`fingerprint` text NOT NULL,
	`response` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`credential_id`, `key`)
);
--> statement-breakpoint
INSERT INTO `__new_idempotency_keys`("credential_id", "key", "fingerprint", "response", "created_at", "expires_at") SELECT "credential_id", "key", "fingerprint", "response", "created_at", "expires_at" FROM `idempotency_keys` WHERE "response" IS NOT NULL;--> statement-breakpoint
DROP TABLE `idempotency_keys`;--> statement-breakpoint
ALTER TABLE `__new_idempotency_keys` RENAME TO `idempotency_keys`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `idempotency_keys_expires_idx` ON `idempotency_keys` (`expires_at`);