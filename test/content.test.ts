import { describe, expect, it } from "vitest";
import { type CampaignContent, compileCampaign, renderMessage, SAMPLE_RECIPIENT, validateCampaignContent } from "../src/content";
import { BENCH_TEMPLATE } from "../bench/worker/bench.content";
import { htmlToText } from "../src/content/html-text";
import { bob, content, newsletter, render, URL } from "./content.fixtures";

describe("rendering", () => {
  it("folds every kind of line break in the subject and preheader into a space", () => {
    const m = render({ subject: "Hi {{ subscriber.name }}", preheader: "{{ subscriber.name }}!" }, { ...bob, name: "A\u2028B\u2029C\u0085D\r\nE" });
    expect(m.subject).toBe("Hi A B C D E");
    expect(m.html ?? m.text).not.toMatch(/[\u2028\u2029\u0085]/);
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
    expect(m.text).toBe(`Paris bob@example.com vip,beta import Weekly Notes FRIEND ${URL}\n\n-- \n1 Main Street, Springfield`);
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
    expect(render({ preheader: "This week: {{ newsletter.name }}" }).text).toMatch(/^This week: Weekly Notes\n\n-- \n/);
    const m = render({});
    expect(m.text).toMatch(/^Hello\n\n-- \n/);
    expect(m.text).toContain(`Unsubscribe: ${URL}`);
    expect(m.html).toBeNull();
  });

  it("gives an html with no text of its own (images only, or blank) the preheader, else the subject, as its text part", () => {
    const footer = `\n\n-- \nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}\n1 Main Street, Springfield`;
    expect(render({ preheader: "This week's picture", html: '<p><img src="https://example.com/a.png" alt=""></p>' }).text).toBe(`This week's picture${footer}`);
    expect(render({ html: "   " }).text).toBe(`Hello${footer}`);
    // Converted after rendering (a tag inside an attribute): the same.
    expect(render({ html: '<img src="https://example.com/{% if subscriber.name %}a{% endif %}.png">' }).text).toBe(`Hello${footer}`);
  });

  it("opens the html with the preheader as hidden preview text", () => {
    const m = render({ preheader: "Inside: {{ subscriber.name }}", html: "<html><body><p>Body</p></body></html>" });
    expect(m.html).toMatch(/^<html><body><div style="display:none;[^"]*">Inside: &lt;b&gt;Bob&lt;\/b&gt;(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>Body<\/p>/);
    expect(m.text).not.toContain("Inside");
    expect(render({ html: "<p>Body</p>" }).html).toMatch(/^<p>Body<\/p>/);
    // Padded with invisible characters, so the inbox's preview line does not run on into the body.
    expect(m.html?.match(/&#847;&zwnj;&nbsp;/g)).toHaveLength(90);
    // On short lines: nothing the service writes comes near RFC 5322's 998 characters a line.
    const full = renderMessage(compileCampaign(content({ preheader: "Peek", html: "<p>x</p>" }), { name: "N".repeat(200), address: `${"A".repeat(200)}\n${"B".repeat(200)}` }), bob, URL);
    expect(Math.max(...(full.html ?? "").split("\n").map((line) => line.length))).toBeLessThan(998);
  });

  it("keeps the footer's sentence and its Unsubscribe link in their own direction, whatever the newsletter's name holds", () => {
    // An override left open in the name reversed the rest of the footer: "… Weekly ebircsbusnU .news".
    const rlo = { name: "Weekly \u202Eswen \u2067x \u200Fעברית", address: null };
    const m = renderMessage(compileCampaign(content({ html: "<p>x</p>" }), rlo), bob, URL);
    expect(m.html).toContain("you subscribed to <bdi>Weekly swen x \u200Fעברית</bdi>. <a href=");
    expect(m.text).toContain("you subscribed to Weekly swen x \u200Fעברית.\nUnsubscribe: ");
    for (const part of [m.html, m.text]) expect(part).not.toMatch(/[\u202A-\u202E\u2066-\u2069]/);
  });

  it("puts no line break or control character into the Subject, whichever source it comes from; the footer names the newsletter on one line", () => {
    // A name stored before names had to be one line: the fallback subject is folded like a rendered one.
    const crlf = { name: "Line one\r\nBcc: x@example.com", address: null };
    const m = renderMessage(compileCampaign(content({ subject: "{{ subscriber.location }}", html: "<p>x</p>" }), crlf), { ...bob, location: null }, URL);
    expect(m.subject).toBe("Line one Bcc: x@example.com");
    expect(m.text).toContain("you subscribed to Line one Bcc: x@example.com.\n");
    expect(m.html).toContain("you subscribed to <bdi>Line one Bcc: x@example.com</bdi>.");
    for (const name of ["A\u2028B", "A\u0085B", "A\rB", "A\nB"]) {
      expect(renderMessage(compileCampaign(content({ subject: "{{ subscriber.name }}" }), { name, address: null }), { ...bob, name: null }, URL).subject).toBe("A B");
    }
    // A filter can make a control character out of text that has none.
    expect(render({ subject: "A{{ '%00%07%0D%0A' | url_decode }}B{{ '%C2%9B' | url_decode }}C" }).subject).toBe("A B C");
  });

  it("gives a message whose subject renders blank the newsletter's name as its subject", () => {
    const m = render({ subject: "{{ subscriber.name }}", text: "{{ campaign.subject }}" }, { ...bob, name: null });
    expect(m.subject).toBe("Weekly Notes");
    expect(m.text.startsWith("Weekly Notes")).toBe(true);
    expect(render({ subject: "{{ subscriber.name }}" }, { ...bob, name: "Ann" }).subject).toBe("Ann");
  });

  it("shows in the derived text what the html shows: escape and escape_once add no entities there", () => {
    const m = render({ html: "<p>Hi {{ subscriber.name | escape }} {{ subscriber.location | escape_once | upcase }}</p>" }, { ...bob, name: "Tom & Jerry <3", location: "a&b" });
    expect(m.html).toContain("Hi Tom &amp; Jerry &lt;3 A&amp;B");
    expect(m.text.startsWith("Hi Tom & Jerry <3 A&B")).toBe(true);
  });

  it("writes text parts with LF line endings only, whatever the template and the address use", () => {
    const crlf = renderMessage(compileCampaign(content({ text: "Hello {{ subscriber.email }}\r\nLine two\r\rBye" }), { ...newsletter, address: "1 Main St\r\nSpringfield" }), bob, URL);
    expect(crlf.text).not.toContain("\r");
    expect(crlf.text).toContain("Hello bob@example.com\nLine two\n\nBye\n\n-- \n");
    expect(crlf.text.endsWith("\n1 Main St\nSpringfield")).toBe(true);
  });

  it("leaves a document's title out of the text derived from it, with or without a body, and keeps what an unclosed head holds", () => {
    expect(render({ html: "<html><head><title>T</title><p>Kept {{ subscriber.email }}</p></html>" }).text.startsWith("Kept bob@example.com")).toBe(true);
    for (const html of ["<html><head><title>My Title</title></head><p>One {{ subscriber.email }}</p></html>", "<title>Frag title</title><p>One {{ subscriber.email }}</p>"]) {
      const m = render({ html });
      expect(m.text).not.toMatch(/Title|title/);
      expect(m.text.startsWith("One bob@example.com")).toBe(true);
    }
  });

  it("adds the footer with the unsubscribe link and the address when the template does not place the link", () => {
    const m = render({ html: "<html><body><p>Body</p></body></html>", text: "Plain body" });
    expect(m.html).toMatch(/<p>Body<\/p><div [^>]*>.*<a href="https:\/\/news\.example\.com\/u\/TOKEN"[^>]*>Unsubscribe<\/a>.*1 Main Street, Springfield.*<\/div><\/body><\/html>$/s);
    expect(m.text).toBe(`Plain body\n\n-- \nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}\n1 Main Street, Springfield`);
    const lines = renderMessage(compileCampaign(content({ html: "<p>x</p>" }), { name: "N", address: "1 Main St <Suite 2>\nSpringfield & Co" }), bob, URL);
    expect(lines.html).toContain("<p style=\"margin:8px 0 0\">1 Main St &lt;Suite 2&gt;<br>\nSpringfield &amp; Co</p>");
    expect(lines.text).toMatch(/1 Main St <Suite 2>\nSpringfield & Co$/);
    const noAddress = renderMessage(compileCampaign(content({ html: "<p>x</p>" }), { name: "N", address: null }), bob, URL);
    expect(noAddress.html).toContain("Unsubscribe</a></p></div>");
  });

  it("sets the footer as part of the message: centred at 600 px with side padding, in the template's own colour, English and left-to-right inside a right-to-left message", () => {
    const m = render({ html: '<html dir="rtl" lang="ar"><body style="background:#0d0d12;color:#e5e5e5"><p>مرحبا</p></body></html>' });
    const footer = m.html?.match(/<div [^>]*>(?:(?!<div).)*Unsubscribe<\/a>.*<\/div>(?=<\/body>)/s)?.[0] ?? "";
    expect(footer).toMatch(/^<div dir="ltr" lang="en" style="[^"]*max-width:600px;margin:32px auto 0;padding:16px 16px 0;[^"]*text-align:center/);
    // No fixed grey: the text (and its link) take the template's colour, as it is (made lighter, a grey
    // body text's footer fell under WCAG's 4.5:1 contrast).
    expect(footer).not.toMatch(/(?<!-)color:#/);
    expect(footer).not.toMatch(/opacity/);
    expect(footer).toContain('style="color:inherit;text-decoration:underline">Unsubscribe</a>');
    expect(footer).toContain("You’re receiving this email because you subscribed to <bdi>Weekly Notes</bdi>.");
    expect(m.text).toContain("\n-- \nYou’re receiving this email because you subscribed to Weekly Notes.\n");
  });

  it("adds no footer where the template places unsubscribe_url itself", () => {
    const bare = (over: Partial<CampaignContent>) => renderMessage(compileCampaign(content(over), { ...newsletter, address: null }), bob, URL);
    const m = bare({ html: '<p>Body <a href="{{ unsubscribe_url }}">leave</a></p>', text: "Body. Leave: {{ unsubscribe_url }}" });
    expect(m.html).toBe(`<p>Body <a href="${URL}">leave</a></p>`);
    expect(m.text).toBe(`Body. Leave: ${URL}`);
    // Derived from an html that places it: the link is in the text, once.
    const derived = bare({ html: '<p>Body <a href="{{ unsubscribe_url }}">leave</a></p>' });
    expect(derived.text).toBe(`Body leave <${URL}>`);
  });

  it("never drops the postal address: a template that places the link but not the address gets the address alone, in html and text", () => {
    const addressOnly = /<div [^>]*>\n<p [^>]*>1 Main Street, Springfield<\/p><\/div><\/body>/;
    const own = '<body><p>Body <a href="{{ unsubscribe_url }}">leave</a></p></body>';
    const m = render({ html: own });
    expect(m.html).toMatch(addressOnly);
    expect(m.html).not.toContain("Unsubscribe</a>");
    expect(m.html?.match(/1 Main Street/g)).toHaveLength(1);
    expect(m.text).toBe(`Body leave <${URL}>\n\n-- \n1 Main Street, Springfield`);
    // The same through liquidjs's renderer (a tag in the part), and from the rendered html.
    expect(render({ html: `<body>{% if true %}<p>Body <a href="{{ unsubscribe_url }}">leave</a></p>{% endif %}</body>` }).html).toMatch(addressOnly);
    expect(render({ html: '<body><p class="{% if true %}a{% endif %}">Body <a href="{{ unsubscribe_url }}">leave</a></p></body>' }).text).toMatch(/\n\n-- \n1 Main Street, Springfield$/);
    // A written text part that places the link but not the address.
    expect(render({ html: own, text: "Body. Leave: {{ unsubscribe_url }}" }).text).toBe(`Body. Leave: ${URL}\n\n-- \n1 Main Street, Springfield`);
    // Lines kept.
    const lines = renderMessage(compileCampaign(content({ html: own }), { name: "N", address: "1 Main St\r\nSpringfield" }), bob, URL);
    expect(lines.html).toContain(">1 Main St<br>\nSpringfield</p></div></body>");
    expect(lines.text).toMatch(/\n-- \n1 Main St\nSpringfield$/);
  });

  it("offers newsletter.address to templates: a message that prints it (or writes it out) gets no second copy", () => {
    const printed = render({ html: '<body><p>Acme, {{ newsletter.address }}. <a href="{{ unsubscribe_url }}">leave</a></p></body>' });
    expect(printed.html).toBe(`<body><p>Acme, 1 Main Street, Springfield. <a href="${URL}">leave</a></p></body>`);
    expect(printed.text).toBe(`Acme, 1 Main Street, Springfield. leave <${URL}>`);
    const written = render({ html: '<p>1 Main Street,<br>Springfield</p><p><a href="{{ unsubscribe_url }}">leave</a></p>', text: "{{ newsletter.address }} {{ unsubscribe_url }}" });
    expect(written.html?.match(/Main Street/g)).toHaveLength(1);
    expect(written.text).toBe(`1 Main Street, Springfield ${URL}`);
    // Escaped like any value, and empty without an address.
    const odd = renderMessage(compileCampaign(content({ html: "<p>{{ newsletter.address }}</p>", text: "{{ newsletter.address }}|" }), { name: "N", address: "A & B <C>" }), bob, URL);
    expect(odd.html).toMatch(/^<p>A &amp; B &lt;C&gt;<\/p>/);
    expect(odd.text).toMatch(/^A & B <C>\|/);
    expect(renderMessage(compileCampaign(content({ text: "[{{ newsletter.address }}]" }), { name: "N", address: null }), bob, URL).text).toMatch(/^\[\]/);
    expect(() => validateCampaignContent(content({ html: "<p>{{ newsletter.address }}</p>" }))).not.toThrow();
    // Printed on one line through a filter, or on its lines with newline_to_br, as the README
    // suggests for html: still shown, so not repeated.
    const lines = { name: "N", address: "Acme Inc.\n12 Main St\nSpringfield, IL 62701\nUSA | Earth" };
    for (const shown of ['{{ newsletter.address | replace: "\n", ", " }}', "{{ newsletter.address | newline_to_br }}", '{{ newsletter.address | replace: "\n", " · " }}']) {
      const m = renderMessage(compileCampaign(content({ html: `<p>Hi <a href="{{ unsubscribe_url }}">leave</a></p><p>${shown}</p>` }), lines), bob, URL);
      expect(m.html?.match(/12 Main St/g), shown).toHaveLength(1);
      expect(m.text.match(/12 Main St/g), shown).toHaveLength(1);
    }
    // Not shown (only part of it): the address footer still comes.
    const part = renderMessage(compileCampaign(content({ html: '<p>Hi <a href="{{ unsubscribe_url }}">leave</a></p><p>Acme Inc., 12 Main St</p>' }), lines), bob, URL);
    expect(part.html?.match(/12 Main St/g)).toHaveLength(2);
  });

  it("decides the footer per message: a link in a branch not taken, or assigned and never shown, still gets it", () => {
    const footer = /Unsubscribe<\/a>.*1 Main Street/s;
    const branch = '<p>Hi</p>{% if subscriber.location == "Paris" %}<a href="{{ unsubscribe_url }}">leave</a>{% endif %}';
    const paris = render({ html: branch });
    expect(paris.html).not.toMatch(footer);
    expect(paris.text).toBe(`Hi\n\nleave <${URL}>\n\n-- \n1 Main Street, Springfield`);
    const elsewhere = render({ html: branch }, { ...bob, location: "Rome" });
    expect(elsewhere.html).toMatch(footer);
    expect(elsewhere.text).toContain(`\n-- \nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}`);
    for (const html of ["<p>x</p>{% if false %}{{ unsubscribe_url }}{% endif %}", "{% assign u = unsubscribe_url %}<p>x</p>"]) {
      expect(render({ html }).html).toMatch(footer);
    }
    const text = render({ text: "Body{% if subscriber.location == 'Rome' %} {{ unsubscribe_url }}{% endif %}" }).text;
    expect(text).toContain(`-- \nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}`);
  });

  it("counts the link as shown in html only as an <a> element's href outside comments, whichever way the part renders", () => {
    const footer = /Unsubscribe<\/a><\/p>\n<p[^>]*>1 Main Street, Springfield<\/p><\/div><\/body>/;
    for (const hidden of [
      "<body><p>x</p><!-- {{ unsubscribe_url }} --></body>",
      "<html><head><title>{{ unsubscribe_url }}</title></head><body><p>x</p></body></html>",
      '<body><p data-u="{{ unsubscribe_url }}">x</p></body>',
      "<body><style>/* {{ unsubscribe_url }} */</style><p>x</p></body>",
      '<body><!-- <a href="{{ unsubscribe_url }}">old</a> --><p>x</p></body>',
      // The same through liquidjs's renderer (a tag in the part).
      "<body>{% if true %}<p>x</p>{% endif %}<!-- {{ unsubscribe_url }} --></body>",
    ]) {
      expect(render({ html: hidden }).html, hidden).toMatch(footer);
    }
    for (const shown of [
      '<body><p><a href="{{ unsubscribe_url }}">Leave</a></p></body>',
      "<body><p><a class='u' href='{{ unsubscribe_url }}'>Leave</a></p></body>",
      "<body><p><A HREF={{ unsubscribe_url }}>Leave</A></p></body>",
      '<body>{% capture u %}{{ unsubscribe_url }}{% endcapture %}<a href="{{ u }}">Leave</a></body>',
    ]) {
      expect(render({ html: shown }).html, shown).not.toMatch(/Unsubscribe<\/a>/);
    }
  });

  it("derives text from everything a client shows, after a stray </body> or </html> too", () => {
    expect(render({ html: "<html><body><p>in</p></body><p>after body</p></html><p>after html</p>" }).text).toMatch(/^in\n\nafter body\n\nafter html\n/);
    // Converted after rendering (a tag inside an attribute): the same.
    expect(render({ html: '<body><p class="{% if true %}a{% endif %}">a</p></body><p>b</p></body>' }).text).toMatch(/^a\n\nb\n/);
  });

  it("places the preheader and footer in the real body: not in comments, not in branches, after the head without a body", () => {
    const pre = /<div style="display:none;[^"]*">Peek(?:\n?&#847;&zwnj;&nbsp;)+<\/div>/;
    const commented = render({ preheader: "Peek", html: "<!-- <body> --><html><body><p>x</p></body></html><!-- </body> -->" }).html ?? "";
    expect(commented).toMatch(/^<!-- <body> --><html><body><div style="display:none;[^"]*">Peek(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>x<\/p><div [^>]*>.*Unsubscribe.*<\/div><\/body><\/html><!-- <\/body> -->$/s);
    const headOnly = render({ preheader: "Peek", html: "<!DOCTYPE html><html><head><title>t</title></head><p>hi</p></html>" }).html ?? "";
    expect(headOnly).toMatch(/^<!DOCTYPE html><html><head><title>t<\/title><\/head><div style="display:none;[^"]*">Peek(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>hi<\/p><div [^>]*>.*Unsubscribe.*<\/div><\/html>$/s);
    const doctypeOnly = render({ preheader: "Peek", html: "<!doctype html><p>hi</p>" }).html ?? "";
    expect(doctypeOnly).toMatch(/^<!doctype html><div style="display:none;[^"]*">Peek(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>hi<\/p>/);
    // An <html> without head or body: after <html>, and the footer before </html>; a bare fragment: first, and at the end.
    const htmlOnly = render({ preheader: "Peek", html: "<html><p>hi</p></html>" }).html ?? "";
    expect(htmlOnly).toMatch(/^<html><div style="display:none;[^"]*">Peek(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>hi<\/p><div [^>]*>.*Unsubscribe.*<\/div><\/html>$/s);
    const fragment = render({ preheader: "Peek", html: "<p>hi</p>" }).html ?? "";
    expect(fragment).toMatch(/^<div style="display:none;[^"]*">Peek(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>hi<\/p><div [^>]*>.*Unsubscribe.*<\/div>$/s);
    // A body closed inside a branch: the footer goes to the top level, shown whichever way it goes.
    const branched = render({ preheader: "Peek", html: "<html><body><p>x</p>{% if subscriber.name %}</body>{% else %}</body>{% endif %}</html>" }).html ?? "";
    expect(branched).toMatch(pre);
    expect(branched).toMatch(/<\/body><div [^>]*>.*Unsubscribe.*<\/div><\/html>$/s);
  });

  it("renders tags that keep state alike in the html and the text derived from it; markup a tag makes stays out of the text", () => {
    const m = render({ html: "<p>{% increment n %} {% cycle 'one', 'two' %} {% cycle 'one', 'two' %}</p>" });
    expect(m.html).toContain("<p>0 one two</p>");
    expect(m.text).toMatch(/^0 one two\n/);
    const table = render({ html: "<table>{% tablerow i in (1..2) %}{{ i }}{% endtablerow %}</table>" });
    expect(table.html).toContain('<td class="col1">1</td>');
    expect(table.text).not.toMatch(/<t[rd]/);
    expect(table.text).toMatch(/^1\n/);
  });

  it("numbers an ordered list's looped items in the text part as the html does; other templates keep the text derived once", () => {
    const looped = render({ html: "<ol>{% for i in (1..3) %}<li>Item {{ i }}</li>{% endfor %}</ol><p>{{ subscriber.email }}</p>" });
    expect(looped.text).toMatch(/^1\. Item 1\n 2\. Item 2\n 3\. Item 3\n\nbob@example.com\n/);
    const tags = render({ html: "<ol>\n{%- for t in subscriber.tags -%}\n<li>#{{ t }}</li>\n{%- endfor -%}\n</ol>" });
    expect(tags.text).toMatch(/^1\. #vip\n 2\. #beta\n/);
    const inLiquid = render({ html: "{% capture li %}<li>x</li>{% endcapture %}<ol>{% liquid\n for i in (1..2)\n echo li\n endfor %}</ol>" });
    expect(inLiquid.text).toMatch(/^1\. x\n 2\. x\n/);
    // The same text through preview and send (one rendering path), and the footer as ever.
    expect(looped.text).toContain(`Unsubscribe: ${URL}`);
    // Loops outside an ordered list, and ordered lists written out, keep the text derived from the template.
    for (const html of ["<ul>{% for t in subscriber.tags %}<li>{{ t }}</li>{% endfor %}</ul><ol><li>a</li><li>b</li></ol>", "<ol><li>a</li></ol>{% for t in subscriber.tags %}<p>{{ t }}</p>{% endfor %}"]) {
      expect(compileCampaign(content({ html }), newsletter).text.kind, html).toBe("template");
    }
    expect(compileCampaign(content({ html: "<ol>{% for i in (1..3) %}<li>{{ i }}</li>{% endfor %}</ol>" }), newsletter).text.kind).toBe("from_rendered_html");
  });

  it("gives each reader the text of the html they get when a branch holds part of an element: a link's URL only where the html has it", () => {
    const offer = '<p>{% if subscriber.tags contains "vip" %}<a href="https://acme.example/vip">{% else %}<a href="https://acme.example/standard">{% endif %}Our offer</a></p>';
    const vip = render({ html: offer });
    expect(vip.html).toContain('<a href="https://acme.example/vip">Our offer</a>');
    expect(vip.text).toMatch(/^Our offer <https:\/\/acme\.example\/vip>\n/);
    expect(vip.text).not.toContain("standard");
    const other = render({ html: offer }, { ...bob, tags: [] });
    expect(other.text).toMatch(/^Our offer <https:\/\/acme\.example\/standard>\n/);
    expect(other.text).not.toContain("/vip");
    // An element left open in a comment or a branch not taken adds nothing to the text.
    for (const html of [
      '{% comment %}Note: <a href="https://old.example/p">{% endcomment %}<p>hi</p><p>there</p>',
      '{% if false %}<a href="https://old.example/q">{% endif %}<p>hi</p><p>there</p>',
      "{% comment %}<ul><li>{% endcomment %}<p>hi</p><p>there</p>",
      '{%- unless subscriber.name -%}<div><a href="https://old.example/r">{%- endunless -%}<p>hi</p><p>there</p>',
      '{% case subscriber.location %}{% when "Rome" %}<blockquote>{% when "Oslo" %}<p>{% endcase %}hi<p>there</p>',
    ]) {
      const { text } = render({ html });
      expect(text, html).toMatch(/^hi\n\nthere\n/);
      expect(compileCampaign(content({ html }), newsletter).text.kind, html).toBe("from_rendered_html");
    }
    // Branches that hold whole elements keep the text derived once from the template.
    for (const html of [
      '<p>{% if subscriber.tags contains "vip" %}<a href="https://acme.example/vip">Our offer</a>{% else %}<a href="https://acme.example/standard">Our offer</a>{% endif %}</p>',
      '<ul>{% for t in subscriber.tags %}<li>{{ t }}: <a href="https://acme.example/t/{{ t }}">more</a></li>{% endfor %}</ul>{% comment %}<p>draft</p>{% endcomment %}',
      "<table><tr>{% for t in subscriber.tags %}<td>{{ t }}<br></td>{% endfor %}</tr></table>",
    ]) {
      expect(compileCampaign(content({ html }), newsletter).text.kind, html).toBe("template");
      expect(render({ html }).text, html).toBe(render({ html }, bob).text);
    }
    const once = render({ html: '<p><a href="{% if subscriber.tags contains "vip" %}https://acme.example/vip{% else %}https://acme.example/standard{% endif %}">Our offer</a></p>' });
    expect(once.text).toMatch(/^Our offer <https:\/\/acme\.example\/vip>\n/);
  });

  it("says in the text part what each reader's own html says, wherever the template's Liquid stands", () => {
    // The reader's html, converted on its own: the words, links, bullets and numbers the text must have.
    // Line by line (a marker is on a line's start), spacing within a line and blank lines aside.
    const said = (text: string) =>
      text
        .split("\n")
        .map((line) => line.replace(/\s+/g, " ").trim())
        .filter((line) => line !== "")
        .join("\n");
    // Each part without the service's footer (the html's opens with `<div dir="ltr" lang="en"`, the text's with `--`).
    const before = (part: string, footer: string) => (part.includes(footer) ? part.slice(0, part.lastIndexOf(footer)) : part);
    const ownText = (html: string | null) => said(htmlToText(before(html ?? "", '<div dir="ltr" lang="en"')));
    const readers = [
      bob,
      { ...bob, name: null, tags: [], location: null, source: null },
      { ...bob, name: "x", location: "https://acme.example/x" },
      { ...bob, name: "https://example.com/x", tags: ["a", "b", "c", "d"] },
      { ...bob, name: "line one\nline two\r\nthree" },
    ];
    for (const html of [
      // Items in a branch of an ordered list, or in a comment there: numbered as the html numbers them.
      '<ol><li>a</li>{% if subscriber.name == "x" %}<li>b</li>{% endif %}<li>c</li></ol>',
      "<ol>{% comment %}<li>old</li>{% endcomment %}<li>news</li></ol>",
      "<ol>{% unless subscriber.location %}<li>where?</li>{% endunless %}<li>{{ subscriber.email }}</li></ol>",
      // Markup captured in one place and shown in another.
      "{% capture items %}{% for t in subscriber.tags %}<li>{{ t }}</li>{% endfor %}<li>z</li>{% endcapture %}<ul>{{ items }}</ul>",
      "{% capture q %}<blockquote>{{ subscriber.email }}</blockquote>{% endcapture %}<p>Said:</p>{{ q }}",
      // A link whose URL is a value: left out where it is the link's text, or renders empty or #….
      '<p><a href="{{ subscriber.location }}">{{ subscriber.location }}</a></p><p>end</p>',
      '<p><a href="{{ subscriber.location }}">Map</a> <a href="#{{ subscriber.name }}">Top</a></p>',
      '<p><a href="https://example.com/x">{{ subscriber.name }}</a></p>',
      '<p><a href="https://example.com/{{ subscriber.tags | first }}">https://example.com/vip</a></p>',
      '<p><a href="https://e.com/{{ subscriber.email }}">https://e.com/bob@example.com</a></p>',
      '<p><a href="https://e.com/{{ subscriber.email }}">https:// e.com/bob@&#8203;example.com</a></p>',
      // Liquid the html shows as text; a link to unsubscribe_url whose text may be the URL; a style in a link.
      "<p>Hi</p>{% if subscriber.location %}<p>Write &#123;&#123; subscriber.email &#125;&#125; or {<b></b>{ subscriber.name }}</p>{% endif %}",
      '<a href="{{ unsubscribe_url }}">{% if subscriber.name == "x" %}{{ unsubscribe_url }}{% else %}Unsubscribe{% endif %}</a>',
      '<a href="https://x.example/{{ subscriber.location }}"><style>b{}</style>https://x.example/Paris</a>',
      // A link inside a link.
      '<a href="https://e.com/{{ subscriber.email }}"><a></a>https://e.com/bob@example.com</a>',
      '<p><a href="https://example.com/x"><a></a>{{ subscriber.name | default: "friend" }}</a></p>',
      // A value's line breaks, which html shows as spaces (but in a <pre>).
      "<blockquote><p>{{ subscriber.name }}</p></blockquote><ul><li>{{ subscriber.name }}</li></ul>",
      "<pre>{{ subscriber.name }}\n{{ subscriber.email }}</pre>",
      "<blockquote>{% echo subscriber.name %}</blockquote><blockquote>{% cycle subscriber.name, 'b' %}</blockquote>",
      "<blockquote>{% liquid\necho subscriber.name\n%}</blockquote>",
      // Liquid shown as text by raw, as written.
      "<p>{% raw %}{{ name }} {{ x | escape }}{% endraw %}</p><p>{{ subscriber.email | escape }}</p>",
      // Whitespace control, which would trim the line breaks the converter writes between blocks.
      "<p>Hello</p>{%- if true -%}<p>World</p>{%- endif -%}",
      "<h2>Hi</h2>{{- subscriber.email }}<ul><li>a</li>{%- if true -%}<li>b</li>{%- endif -%}</ul>",
      // A table with header cells, laid out in columns: a loop in one cell and a value in the next.
      "<table><tr><th>Tags</th><th>Email</th></tr><tr><td>{% for t in subscriber.tags %}{{ t }}<br>{% endfor %}</td><td>{{ subscriber.email }}</td></tr></table>",
    ]) {
      for (const reader of readers) {
        const m = render({ html }, reader);
        expect(said(before(m.text, "\n-- \n")), `${html} for ${reader.name}`).toBe(ownText(m.html));
      }
    }
    // The benchmark's newsletter (a 20 KB layout of tables, five values, a link to unsubscribe_url) reads its text once.
    expect(compileCampaign({ ...BENCH_TEMPLATE, text: null }, newsletter).text.kind).toBe("template");
    // Links to a fixed address or to unsubscribe_url, values in text, loops in an unordered list: read once.
    for (const html of [
      '<p>Hello {{ subscriber.name | default: "there" }}</p><a href="https://acme.example/a?e={{ subscriber.email }}">Read more</a><a href="{{ unsubscribe_url }}">Unsubscribe</a>',
      "<ul>{% for t in subscriber.tags %}<li>{{ t }}</li>{% endfor %}</ul><ol><li>a</li><li>b</li></ol>",
      '{% capture n %}{{ subscriber.name | upcase }}{% endcapture %}<p>{{ n }}</p>',
    ]) {
      expect(compileCampaign(content({ html }), newsletter).text.kind, html).toBe("template");
    }
  });

  it("keeps mailto: links' scheme in the text part, and reads a table with header cells as rows, a layout table as blocks", () => {
    const mail = render({ html: '<p>Write to <a href="mailto:editor@example.com?subject=Issue%2042&amp;body=Hi">the editor</a> or <a href="tel:+15551234567">call</a></p>' });
    expect(mail.text).toMatch(/^Write to the editor <mailto:editor@example\.com\?subject=Issue%2042&body=Hi> or\s+call <tel:\+15551234567>/);
    const data = render({ html: "<table><tr><th>Item</th><th>Qty</th></tr><tr><td>Chair</td><td>2</td></tr><tr><td>Stool</td><td>{{ subscriber.location }}</td></tr></table>" });
    expect(data.text).toMatch(/^Item +Qty\nChair +2\nStool +Paris\n/);
    const layout = render({ html: '<table width="100%"><tr><td><p>One</p></td><td><p>Two</p></td></tr></table>' });
    expect(layout.text).toMatch(/^One\n\nTwo\n/);
    // A data table of more than 1,000 cells (whose column layout would cost time growing faster than
    // the table) reads one cell after the other; one of 1,000 still in columns.
    const table = (rows: number) => `<table><tr><th>Item</th><th>Qty</th></tr>${"<tr><td>Chair</td><td>2</td></tr>".repeat(rows)}</table>`;
    expect(render({ html: table(499) }).text).toMatch(/^Item +Qty\nChair +2\n/);
    expect(render({ html: table(500) }).text).toMatch(/^Item\n\nQty\n\nChair\n\n2\n/);
  });

  it("carries the one-click unsubscribe headers", () => {
    expect(render({}).headers).toEqual({ "List-Unsubscribe": `<${URL}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" });
  });

  it("converts the rendered html when the template's Liquid does not survive conversion", () => {
    const m = render({ html: '<p {% if subscriber.name %}class="named"{% endif %}>Hi</p><p>{{ subscriber.email }}</p>' });
    expect(m.text).toMatch(/^Hi\n\nbob@example.com\n\n-- \n/);
  });

  it("renders the sample subscriber", () => {
    expect(render({ subject: "{{ subscriber.name }} <{{ subscriber.email }}>" }, SAMPLE_RECIPIENT).subject).toBe("Sample Subscriber <subscriber@example.com>");
    // Tagged `sample`, so a preview shows a tag branch; location and source empty.
    const fields = '{{ subscriber.tags | join: "," }}|{{ subscriber.location }}|{{ subscriber.source }}|{% if subscriber.tags contains "sample" %}tagged{% endif %}';
    expect(render({ subject: fields }, SAMPLE_RECIPIENT).subject).toBe("sample|||tagged");
  });
});

describe("what readers and their mail clients see", () => {
  it("gives the footer dark-mode colours of its own in a template with a dark mode, and leaves other templates' footer their text colour", () => {
    const adaptive =
      '<style>@media (prefers-color-scheme: dark) { body { background:#18181b !important; } .txt { color:#f4f4f5 !important; } }</style>' +
      '<body style="color:#18181b"><p class="txt">Hi</p></body>';
    const dark = render({ html: adaptive }).html ?? "";
    const footer = dark.slice(dark.indexOf("Hi</p>"));
    expect(footer).toMatch(/^Hi<\/p><style>@media \(prefers-color-scheme: dark\)\{\.nl-service-footer\{background:#18181b!important;color:#e4e4e7!important;/);
    expect(footer).toContain('<div class="nl-service-footer" dir="ltr"');
    // The address-only footer of a template that links the unsubscribe URL itself, too.
    const linked = render({ html: adaptive.replace("Hi", 'Hi <a href="{{ unsubscribe_url }}">leave</a>') }).html ?? "";
    expect(linked).toContain('<div class="nl-service-footer" dir="ltr"');
    expect(linked).toContain("1 Main Street, Springfield");
    const plain = render({ html: '<body style="color:#333"><p>Hi</p></body>' }).html ?? "";
    expect(plain).not.toContain("nl-service-footer");
    expect(plain).not.toContain("<style>");
  });

  it("ends <body …> where a browser ends it: a > in a quoted attribute value does not, so the preheader goes after the whole tag", () => {
    const m = render({ preheader: "Teaser", html: '<html><body class="a" data-note="5 > 3" style="margin:0"><p>Hi</p></body></html>' });
    expect(m.html).toMatch(/^<html><body class="a" data-note="5 > 3" style="margin:0"><div style="display:none[^"]*">Teaser/);
    // A long one (a data: URI background) too.
    const long = `<body style="background:url(data:image/png;base64,${"A".repeat(20_000)})">`;
    expect(render({ preheader: "Teaser", html: `${long}<p>Hi</p></body>` }).html?.startsWith(`${long}<div style="display:none`)).toBe(true);
    const single = render({ preheader: "Teaser", html: "<html data-x='a>b'><p>Hi</p></html>" });
    expect(single.html).toMatch(/^<html data-x='a>b'><div style="display:none[^"]*">Teaser/);
  });

  it("reads a text part without the lines that only look blank (spacer cells), and with a linked image's label", () => {
    const spacer = (fill: string) => `<tr><td height="16" style="font-size:16px;line-height:16px">${fill}</td></tr>`;
    const html =
      `<table role="presentation">${spacer("&nbsp;")}<tr><td><h1>Weekly digest</h1></td></tr>${spacer("&nbsp;")}` +
      `<tr><td><p>First paragraph.</p></td></tr>${spacer("&zwnj;")}${spacer("&#847; &nbsp;")}<tr><td><p>Second, {{ subscriber.location }}.</p></td></tr></table>` +
      '<p><a href="https://shop.example/new"><img src="https://shop.example/b.png" alt="See new arrivals"></a> ' +
      '<a href="https://x.example/acme"><img src="https://x.example/i.png" alt=" "></a> <img src="https://t.example/pixel.gif" alt="tracking"></p>';
    // Both ways of reading the text: once per campaign (no Liquid tag), and per message (a tag).
    for (const template of [html, `{% if true %}${html}{% endif %}`]) {
      const text = render({ html: template }).text;
      expect(text.slice(0, text.indexOf("\n\n-- \n"))).toBe(
        "Weekly digest\n\nFirst paragraph.\n\nSecond, Paris.\n\nSee new arrivals <https://shop.example/new> https://x.example/acme",
      );
    }
  });

  it("opens the text footer with the signature delimiter, one blank line after the campaign's own text however it ends", () => {
    for (const own of ["Cheers,\nAda", "Cheers,\nAda\n", "Cheers,\nAda\r\n\r\n\n"]) {
      expect(render({ text: own }).text).toBe(
        `Cheers,\nAda\n\n-- \nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}\n1 Main Street, Springfield`,
      );
    }
    // The address-only footer of a text that shows the link itself: the same one blank line.
    expect(render({ text: "Leave: {{ unsubscribe_url }}\n\n\n" }).text).toBe(`Leave: ${URL}\n\n-- \n1 Main Street, Springfield`);
    // Line breaks a tag leaves at the end too.
    expect(render({ text: "Hello\n{% if true %}{% endif %}\n\n" }).text).toMatch(/^Hello\n\n-- \nYou’re receiving/);
    // Without any footer (the text shows the link and the address), the text ends where its words do.
    expect(render({ text: "Leave: {{ unsubscribe_url }}\n{{ newsletter.address }}\n\n" }).text).toBe(`Leave: ${URL}\n1 Main Street, Springfield`);
    // Blank lines inside the campaign's own text stay as written.
    expect(render({ text: "A\n\n\n\nB\n" }).text).toMatch(/^A\n\n\n\nB\n\n-- \n/);
    // From html, tidied, the delimiter keeps its space.
    expect(render({ html: "<p>Hi</p>" }).text).toMatch(/^Hi\n\n-- \nYou’re receiving/);
  });
});
