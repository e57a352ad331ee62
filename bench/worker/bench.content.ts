// The campaign template of the content benchmark (bench/lib/content.mjs): about 20 KB of html with
// five variables, as a real newsletter issue is. Shared by the render route and the send comparison.

const paragraph =
  '<tr><td style="padding:12px 24px;font:16px/1.6 Georgia,serif;color:#222222">Lorem ipsum dolor sit amet, consectetur adipiscing elit. Integer nec odio. Praesent libero. Sed cursus ante dapibus diam. Sed nisi. Nulla quis sem at nibh elementum imperdiet. <a href="https://example.com/articles/1" style="color:#0b57d0">Read more</a></td></tr>';

export const BENCH_TEMPLATE = {
  subject: "{{ subscriber.name | default: 'Friend' }}, this week in {{ newsletter.name }}",
  preheader: "Five stories picked for {{ subscriber.location | default: 'you' }}",
  html:
    '<html><head><meta charset="utf-8"><title>Weekly</title></head><body style="margin:0;background:#f4f4f4">' +
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center">' +
    '<table role="presentation" width="600" cellpadding="0" cellspacing="0" style="background:#ffffff">' +
    '<tr><td style="padding:24px"><h1>Hello {{ subscriber.name | default: "there" }}</h1><p>Sent to {{ subscriber.email }}</p></td></tr>' +
    paragraph.repeat(48) +
    '<tr><td style="padding:24px;font:12px Arial,sans-serif;color:#666666"><a href="{{ unsubscribe_url }}">Unsubscribe</a></td></tr>' +
    "</table></td></tr></table></body></html>",
  text: null,
};
