-- The service's own signing key (cursors, links in mail): 32 random bytes, made once, here, so that no
-- deployment needs a secret for it. CURSOR_SECRET, when set, is used instead (src/lib/signing.ts).
INSERT INTO `service_keys` (`name`, `secret`, `created_at`)
VALUES ('signing', lower(hex(randomblob(32))), CAST(unixepoch('subsec') * 1000 AS INTEGER))
ON CONFLICT (`name`) DO NOTHING;
