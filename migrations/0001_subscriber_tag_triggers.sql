-- subscriber_tags mirrors subscribers.tags so that the `tag` list filter is an index range scan.
-- Triggers keep the two in step inside the very statement that writes the subscriber.
CREATE TRIGGER `subscribers_tags_after_insert` AFTER INSERT ON `subscribers`
BEGIN
  INSERT OR IGNORE INTO `subscriber_tags` (`workspace_id`, `tag`, `subscriber_id`)
    SELECT NEW.`workspace_id`, `value`, NEW.`id` FROM json_each(NEW.`tags`);
END;
--> statement-breakpoint
CREATE TRIGGER `subscribers_tags_after_update` AFTER UPDATE OF `tags` ON `subscribers`
WHEN NEW.`tags` IS NOT OLD.`tags`
BEGIN
  DELETE FROM `subscriber_tags` WHERE `subscriber_id` = NEW.`id`;
  INSERT OR IGNORE INTO `subscriber_tags` (`workspace_id`, `tag`, `subscriber_id`)
    SELECT NEW.`workspace_id`, `value`, NEW.`id` FROM json_each(NEW.`tags`);
END;
