import { describe, expect, it } from "vitest";
import { ApiError } from "../src/errors/api-error";
import {
  CONTENT_LIMITS,
  compileCampaign,
  renderMessage,
  SAMPLE_RECIPIENT,
  type CampaignContent,
  type Recipient,
  validateCampaignContent,
} from "../src/content";

const newsletter = { name: "Weekly Notes", address: "1 Main Street, Springfield" };
const bob: Recipient = { email: "bob@example.com", name: "<b>Bob</b>", tags: ["vip", "beta"], location: "Paris", source: "import" };
const URL = "https://news.example.com/u/TOKEN";

const content = (over: Partial<CampaignContent>): CampaignContent => ({ subject: "Hello", preheader: null, html: null, text: null, ...over });
const render = (over: Partial<CampaignContent>, recipient: Recipient = bob) =>
  renderMessage(compileCampaign(content(over), newsletter), recipient, URL);

/** The 400 a template gets when saved. */
const rejection = (over: Partial<CampaignContent>) => {
  try {
    validateCampaignContent(content(over));
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    expect(e.code).toBe("validation_failed");
    return { param: e.param, message: e.message };
  }
  throw new Error("expected the content to be rejected");
};

describe("rendering", () => {
  it("escapes every output in html, and nothing in text or subject", () => {
    const m = render({ subject: "Hi {{ subscriber.name }}", html: "<p>Hi {{ subscriber.name }}</p>", text: "Hi {{ subscriber.name }}" });
    expect(m.html).toContain("<p>Hi &lt;b&gt;Bob&lt;/b&gt;</p>");
    expect(m.html).not.toContain("<b>Bob</b>");
    expect(m.text).toMatch(/^Hi <b>Bob<\/b>/);
    expect(m.subject).toBe("Hi <b>Bob</b>");
  });

  it("an explicit escape in html escapes once, not twice", () => {
    const m = render({ html: '<p>{{ subscriber.name | escape }} {{ "a&b" | escape_once }}</p>', text: "x {{ unsubscribe_url }}" });
    expect(m.html).toContain("<p>&lt;b&gt;Bob&lt;/b&gt; a&amp;b</p>");
  });

  it("applies the usual filters and renders every variable", () => {
    const m = render(
      {
        subject: "{{ subscriber.name | default: 'friend' | upcase }}",
        text: "{{ subscriber.location | capitalize }} {{ subscriber.email }} {{ subscriber.tags | join: ',' }} {{ subscriber.source }} {{ newsletter.name }} {{ campaign.subject }} {{ unsubscribe_url }}",
      },
      { ...bob, name: null, location: "paris" },
    );
    expect(m.subject).toBe("FRIEND");
    expect(m.text).toBe(`Paris bob@example.com vip,beta import Weekly Notes FRIEND ${URL}`);
  });

  it("strips line breaks from the rendered subject", () => {
    expect(render({ subject: "A{{ subscriber.location }}", text: "x {{ unsubscribe_url }}" }, { ...bob, location: "\r\nBcc: x" }).subject).toBe("A Bcc: x");
  });

  it("derives the text part from the html: readable, links kept as URLs, variables rendered", () => {
    const m = render({
      html: '<html><head><style>p{color:red}</style></head><body><h1>News for {{ subscriber.name | default: "you" }}</h1><p>Read <a href="https://example.com/a?x=1&amp;y=2">the article</a>.</p>{% if subscriber.location %}<p>From {{ subscriber.location }}</p>{% endif %}<img src="https://t.example.com/p.gif"></body></html>',
    });
    expect(m.text).toContain("News for <b>Bob</b>");
    expect(m.text).toContain("Read the article <https://example.com/a?x=1&y=2>.");
    expect(m.text).toContain("From Paris");
    expect(m.text).not.toContain("color:red");
    expect(m.text).not.toContain("p.gif");
    expect(m.text).toContain(`Unsubscribe: ${URL}`);
  });

  it("falls back to the preheader, else the subject, when there is neither html nor text", () => {
    expect(render({ preheader: "This week: {{ newsletter.name }}" }).text).toMatch(/^This week: Weekly Notes\n\n--\n/);
    const m = render({});
    expect(m.text).toMatch(/^Hello\n\n--\n/);
    expect(m.text).toContain(`Unsubscribe: ${URL}`);
    expect(m.html).toBeNull();
  });

  it("opens the html with the preheader as hidden preview text", () => {
    const m = render({ preheader: "Inside: {{ subscriber.name }}", html: "<html><body><p>Body</p></body></html>" });
    expect(m.html).toMatch(/^<html><body><div style="display:none;[^"]*">Inside: &lt;b&gt;Bob&lt;\/b&gt;<\/div><p>Body<\/p>/);
    expect(m.text).not.toContain("Inside");
    expect(render({ html: "<p>Body</p>" }).html).toMatch(/^<p>Body<\/p>/);
  });

  it("adds the footer with the unsubscribe link and the address when the template does not place the link", () => {
    const m = render({ html: "<html><body><p>Body</p></body></html>", text: "Plain body" });
    expect(m.html).toMatch(/<p>Body<\/p><div [^>]*>.*<a href="https:\/\/news\.example\.com\/u\/TOKEN"[^>]*>Unsubscribe<\/a>.*1 Main Street, Springfield.*<\/div><\/body><\/html>$/);
    expect(m.text).toBe(`Plain body\n\n--\nYou receive this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}\n1 Main Street, Springfield`);
    const noAddress = renderMessage(compileCampaign(content({ html: "<p>x</p>" }), { name: "N", address: null }), bob, URL);
    expect(noAddress.html).toContain("Unsubscribe</a></p></div>");
  });

  it("adds no footer where the template places unsubscribe_url itself", () => {
    const m = render({ html: '<p>Body <a href="{{ unsubscribe_url }}">leave</a></p>', text: "Body. Leave: {{ unsubscribe_url }}" });
    expect(m.html).toBe(`<p>Body <a href="${URL}">leave</a></p>`);
    expect(m.text).toBe(`Body. Leave: ${URL}`);
    // Derived from an html that places it: the link is in the text, once.
    const derived = render({ html: '<p>Body <a href="{{ unsubscribe_url }}">leave</a></p>' });
    expect(derived.text).toBe(`Body leave <${URL}>`);
  });

  it("carries the one-click unsubscribe headers", () => {
    expect(render({}).headers).toEqual({ "List-Unsubscribe": `<${URL}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" });
  });

  it("converts the rendered html when the template's Liquid does not survive conversion", () => {
    const m = render({ html: '<p {% if subscriber.name %}class="named"{% endif %}>Hi</p><p>{{ subscriber.email }}</p>' });
    expect(m.text).toMatch(/^Hi\n\nbob@example.com\n\n--\n/);
  });

  it("renders the sample subscriber", () => {
    expect(render({ subject: "{{ subscriber.name }} <{{ subscriber.email }}>" }, SAMPLE_RECIPIENT).subject).toBe("Sample Subscriber <subscriber@example.com>");
  });
});

describe("template errors (400 validation_failed naming the field, the line and the problem)", () => {
  it("names an unknown variable, even in a branch the sample would not take", () => {
    const e = rejection({ html: "<p>Hi</p>\n{% if false %}\n{{ subscriber.nmae }}\n{% endif %}" });
    expect(e.param).toBe("html");
    expect(e.message).toContain('unknown variable "subscriber.nmae" on line 3');
    expect(rejection({ text: "{{ subscriber[x] }}" }).message).toContain('unknown variable "subscriber[x]" on line 1');
    expect(rejection({ subject: "{{ campaign.subject }}" }).param).toBe("subject");
    expect(rejection({ preheader: "{{ subscriber }}" }).message).toContain('unknown variable "subscriber" on line 1');
  });

  it("names an unclosed tag and an unclosed output", () => {
    const e = rejection({ text: "a\n\n{% if subscriber.name %}hi" });
    expect(e).toEqual({ param: "text", message: "text: tag {% if subscriber.name %} not closed on line 3" });
    expect(rejection({ subject: "Hi {{ subscriber.name" }).message).toContain('output "{{ subscriber.name" not closed on line 1');
  });

  it("names an unknown filter", () => {
    expect(rejection({ html: "<p>\n{{ subscriber.name | shout }}</p>" })).toEqual({ param: "html", message: "html: undefined filter: shout on line 2" });
    // raw would bypass the escaping: it is no filter in html.
    expect(rejection({ html: "{{ subscriber.name | raw }}" }).message).toContain("undefined filter: raw");
  });

  it("rejects includes, renders and layouts", () => {
    expect(rejection({ html: '<p>a</p>{% include "footer" %}' }).message).toContain("{% include %} is not supported");
    expect(rejection({ text: '{% render "x" %}' }).message).toContain("{% render %} is not supported");
    expect(rejection({ text: '{% layout "x" %}' }).message).toContain("{% layout %} is not supported");
  });

  it("rejects a loop over a huge range, taken or not, and bounds loops it cannot see", () => {
    expect(rejection({ text: "{% if false %}\n{% for i in (1..100000000) %}x{% endfor %}{% endif %}" }).message).toContain(
      "a loop may cover at most 1000 items (range (1..100000000)) on line 2",
    );
    const nested = "{% for i in (1..1000) %}{% for j in (1..1000) %}{% endfor %}{% endfor %}";
    expect(rejection({ text: nested }).message).toContain("a loop over too large a range");
    const doubling = "{% assign s = 'xx' %}{% for i in (1..40) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}{{ s }}";
    expect(rejection({ text: doubling }).param).toBe("text");
    expect(rejection({ html: "{% for i in (1..1000) %}{{ subscriber.email | append: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}".repeat(40) }).param).toBe("html");
  });

  it("accepts templates that use every variable and filter as documented", () => {
    expect(() =>
      validateCampaignContent(
        content({
          subject: "{{ subscriber.name | default: 'Hi' }}",
          preheader: "{{ newsletter.name }}",
          html: "{% for tag in subscriber.tags %}{{ tag | capitalize }}{{ forloop.index }}{% endfor %}{{ subscriber.tags.size }}{% assign n = subscriber.name | upcase %}{{ n }}{% capture c %}{{ subscriber.location }}{% endcapture %}{{ c }}{{ subscriber.source | escape }}",
          text: "{{ campaign.subject }} {{ unsubscribe_url }}",
        }),
      ),
    ).not.toThrow();
  });

  it("has the limits the contract states", () => {
    expect(CONTENT_LIMITS).toEqual({ html: 524288, text: 262144 });
  });
});
