ALTER TABLE `subscribers` ADD `status_campaign_id` text;--> statement-breakpoint
-- Subscribers who left through a link before the campaign was recorded: the campaign of their latest
-- link unsubscribe (one pass over the deliveries; SQLite's max() takes its row's campaign_id along).
UPDATE `subscribers` SET `status_campaign_id` = `latest`.`campaign_id`
  FROM (SELECT `subscriber_id`, `campaign_id`, max(`unsubscribed_at`) FROM `deliveries` WHERE `unsubscribed_at` IS NOT NULL GROUP BY `subscriber_id`) AS `latest`
 WHERE `subscribers`.`id` = `latest`.`subscriber_id` AND `subscribers`.`status_source` = 'link';
