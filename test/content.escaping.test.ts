import { describe, expect, it } from "vitest";
import { validateCampaignContent } from "../src/content";
import { bob, content, ownPart, rejection, render } from "./content.fixtures";

// Every value a template prints into html is escaped for where it lands in the markup, or refused
// when the template is saved where no escaping makes it safe.

describe("escaping by place in the markup", () => {
  it("escapes every output in html, and nothing in text or subject", () => {
    const m = render({ subject: "Hi {{ subscriber.name }}", html: "<p>Hi {{ subscriber.name }}</p>", text: "Hi {{ subscriber.name }}" });
    expect(m.html).toContain("<p>Hi &lt;b&gt;Bob&lt;/b&gt;</p>");
    expect(m.html).not.toContain("<b>Bob</b>");
    expect(m.text).toMatch(/^Hi <b>Bob<\/b>/);
    expect(m.subject).toBe("Hi <b>Bob</b>");
  });

  it("escaping html's outputs takes nothing from the render's allocation budget: what saved renders for longer values too", () => {
    // Saved with the sample subscriber; a real one with a 200-character name makes 600,000 characters
    // of escaped output, within html's 2 MiB cap, as the text part of the same template is.
    const template = "<p>{{ subscriber.name }}</p>\n".repeat(3_000);
    expect(() => validateCampaignContent(content({ html: template, text: template }))).not.toThrow();
    const long = { ...bob, name: "N".repeat(199) + "&" };
    const m = render({ html: template, text: template }, long);
    expect(m.html?.split("N".repeat(199) + "&amp;")).toHaveLength(3_001);
    expect(m.text?.split("N".repeat(199) + "&")).toHaveLength(3_001);
    // The text read from the html (no text of its own) prints each value with its line breaks made
    // spaces, as html shows them: that, too, takes nothing from the budget.
    const derived = render({ html: template }, { ...long, name: `${"N".repeat(198)}\n&` });
    expect(derived.text?.split(`${"N".repeat(198)} &`)).toHaveLength(3_001);
    const looped = "<p>{% for i in (1..1000) %}{{ subscriber.name }}{% endfor %}</p>";
    expect(() => validateCampaignContent(content({ html: looped }))).not.toThrow();
    expect(render({ html: looped }, long).text?.split("N".repeat(199) + "&")).toHaveLength(1_001);
  });

  it("an explicit escape in html escapes once, not twice", () => {
    const m = render({ html: '<p>{{ subscriber.name | escape }} {{ "a&b" | escape_once }}</p>', text: "x {{ unsubscribe_url }}" });
    expect(m.html).toContain("<p>&lt;b&gt;Bob&lt;/b&gt; a&amp;b</p>");
  });

  it("prints a capture as it was made in html: its outputs escaped once, its markup kept", () => {
    const m = render({ html: "{% capture greeting %}<b>Hi</b> {{ subscriber.name }}{% endcapture %}<p>{{ greeting }}</p><p>{{ greeting | default: 'x' }}</p>" });
    expect(m.html).toContain("<p><b>Hi</b> &lt;b&gt;Bob&lt;/b&gt;</p><p><b>Hi</b> &lt;b&gt;Bob&lt;/b&gt;</p>");
    // The text derived from it captures text: nothing escaped there.
    expect(m.text).toMatch(/^Hi <b>Bob<\/b>/);
    // Only what a capture made is printed as it is; the raw value it was made from is escaped as ever.
    const own = render({ html: "{% capture n %}{{ subscriber.name }}{% endcapture %}<p>{{ subscriber.name }}</p>" }, { ...bob, name: "<i>x</i>" });
    expect(own.html).toContain("<p>&lt;i&gt;x&lt;/i&gt;</p>");
  });

  it("newline_to_br in html makes each line break a real <br />, the value's own markup escaped", () => {
    const lines = { ...bob, name: "<b>Bob</b>\nSecond line\r\nThird" };
    const m = render({ html: "<p>{{ subscriber.name | newline_to_br }}</p>" }, lines);
    expect(m.html).toContain("<p>&lt;b&gt;Bob&lt;/b&gt;<br />\nSecond line<br />\nThird</p>");
    // The text part read from it keeps the lines.
    expect(m.text).toMatch(/^<b>Bob<\/b>\nSecond line\nThird/);
    // A filter after it makes it text again, escaped, markup and all (as a capture's html): no markup gets through.
    const after = render({ html: "<p>{{ subscriber.name | newline_to_br | upcase }}</p>" }, lines).html ?? "";
    expect(after).toContain("&lt;BR /&gt;\nSECOND LINE&lt;BR /&gt;\nTHIRD</p>");
    expect(after).not.toMatch(/<B>|<BR/);
    // In an attribute its brackets are escaped like any markup there; in text (no markup) it leaves the lines as they are.
    expect(ownPart('<p title="{{ subscriber.name | newline_to_br }}">t</p>', { name: "a\nb" })).toBe('<p title="a&#60;br /&#62;\nb">t</p>');
    expect(render({ html: "<p>x</p>", text: "{{ subscriber.name | newline_to_br }}|" }, { ...bob, name: "a\nb" }).text).toMatch(/^a\nb\|/);
    // A value that merely looks like its output is still escaped.
    expect(render({ html: "<p>{{ subscriber.name }}</p>" }, { ...bob, name: "a<br />\nb" }).html).toContain("<p>a&lt;br /&gt;\nb</p>");
  });

  it("keeps a value inside an unquoted attribute: it cannot add attributes of its own", () => {
    const at = (template: string, name: string) => ownPart(template, { name });
    const attack = "x onmouseover=alert(document.domain) style=display:block";
    // Unquoted values (valid HTML): spaces, = and ` print as references, which a browser reads back as
    // the same text inside the one value.
    expect(at("<p title={{ subscriber.name }}>t</p>", attack)).toBe("<p title=x&#32;onmouseover&#61;alert(document.domain)&#32;style&#61;display:block>t</p>");
    expect(at("<a href=https://shop.example/?q={{ subscriber.name }}>q</a>", "a b")).toBe("<a href=https://shop.example/?q=a&#32;b>q</a>");
    expect(at("<input value={{ subscriber.name }}>", "`onfocus=alert(1)\tautofocus")).toBe("<input value=&#96;onfocus&#61;alert(1)&#9;autofocus>");
    // A value standing for an attribute's name cannot become a name and a value.
    expect(at("<p {{ subscriber.name }}>t</p>", "onclick=alert(1)")).toBe("<p onclick&#61;alert(1)>t</p>");
    // Nor two names: `/` separates attributes where a name stands (a browser reads `x/hidden` as `x` and `hidden`).
    expect(at('<p class="greeting" {{ subscriber.name }}>t</p>', "x/hidden")).toBe('<p class="greeting" x&#47;hidden>t</p>');
    // Read in one pass, however much Liquid follows the value (a test that would never end otherwise).
    expect(at(`<p {{ subscriber.name }}${"{% if true %}{% endif %}".repeat(300)} x>t</p>`, "hidden")).toBe("<p hidden x>t</p>");
    // A value before another attribute of the template's stays its own (empty) attribute.
    expect(at('<p {{ subscriber.name }} title="t">t</p>', "hidden")).toBe('<p hidden title="t">t</p>');
    expect(at("<a href=https://shop.example/{{ subscriber.name }}>q</a>", "a/b")).toBe("<a href=https://shop.example/a/b>q</a>");
    // Nor the name of an attribute whose value the template wrote: that is a name Liquid writes.
    for (const html of [
      '<p {{ subscriber.name }}="alert(1)">t</p>',
      "<p data-x {{ subscriber.name }} = 1>t</p>",
      '<a data-{{ subscriber.name }}="x">t</a>',
      // Space a branch writes need not be there: the value may name the attribute all the same.
      '<a href="https://example.com" {{ subscriber.name }}{% if subscriber.name %} {% else %} {% endif %}="go()">t</a>',
      '<a {{ subscriber.name }}{% unless false %}\n{% endunless %}="go()">t</a>',
      '<a {{ subscriber.name }}{% for i in (1..1) %} {% endfor %}x="go()">t</a>',
    ]) {
      expect(rejection({ html }).message, html).toContain("whose name Liquid writes");
    }
    // A capture printed unquoted: its html kept, its spaces too, as references.
    expect(at("{% capture n %}{{ subscriber.name }}{% endcapture %}<p title={{ n }}>t</p>", attack)).toContain("<p title=x&#32;onmouseover&#61;");
    // A quote inside an unquoted value opens nothing.
    expect(at("<p title=it's{{ subscriber.name }}>t</p>", "a b")).toBe("<p title=it'sa&#32;b>t</p>");
    // An empty value that is an unquoted attribute's whole value prints "": the next attribute stays one.
    expect(at('<img alt={{ subscriber.name }} src="https://img.example/a.png">', "")).toBe('<img alt="" src="https://img.example/a.png">');
    expect(at("<img alt=x{{ subscriber.name }} src=a.png>", "")).toBe("<img alt=x src=a.png>");
    // Quoted values and text print as they always did.
    expect(at('<p title="{{ subscriber.name }}">{{ subscriber.name }}</p>', "a = b")).toBe('<p title="a = b">a = b</p>');
    expect(at("<a href='https://x.example/?q={{ subscriber.name }}'>q</a>", "a=b c")).toBe("<a href='https://x.example/?q=a=b c'>q</a>");
  });

  it("refuses a value in an event handler or a script when the template is saved, naming the line", () => {
    expect(rejection({ html: '<p>\n<a onclick="greet(\'{{ subscriber.name }}\')">x</a></p>' })).toEqual({
      param: "html",
      message: expect.stringMatching(/^html: a value cannot be printed into an event-handler attribute .* on line 2$/),
    });
    expect(rejection({ html: "<body onload={{ subscriber.name }}>" }).message).toContain("event-handler attribute");
    expect(rejection({ html: "<script>var n = {{ subscriber.name }};</script>" }).message).toMatch(/inside <script>.* on line 1$/);
    expect(rejection({ html: "<SCRIPT type=x>{% echo subscriber.name %}</SCRIPT>" }).message).toContain("inside <script>");
    // An attribute name Liquid writes could be a handler's.
    expect(rejection({ html: '<a o{% if true %}n{% endif %}click="{{ subscriber.source }}">x</a>' }).message).toContain("whose name Liquid writes");
    expect(rejection({ html: '<p data-{{ subscriber.source }}="{{ subscriber.name }}">x</p>' }).message).toContain("whose name Liquid writes");
    expect(rejection({ html: '<a {% if true %}on{% endif %}click="{{ subscriber.source }}">x</a>' }).message).toContain("whose name Liquid writes");
    // After the script, and in a handler-looking name that is not an attribute, values are fine.
    expect(() => validateCampaignContent(content({ html: "<script>x()</script><p>{{ subscriber.name }}</p><p data-once=\"{{ subscriber.name }}\">t</p>" }))).not.toThrow();
  });

  it("never lets a value bring a script or data scheme into a link: escaping alone would not stop javascript:", () => {
    const at = (template: string, location: string) => ownPart(template, { location });
    for (const location of ["javascript:alert(1)", " JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "data:text/html,<script>x</script>", "vbscript:x", ":x"]) {
      // At the start of an href, a src or any URL attribute, quoted or not, through steps and through tags.
      expect(at('<a href="{{ subscriber.location }}">x</a>', location)).toBe('<a href="#">x</a>');
      expect(at("<img alt=\"a>b\" src='{{ subscriber.location }}'>", location)).toBe("<img alt=\"a>b\" src='#'>");
      expect(at("<a href={{ subscriber.location }}>x</a>", location)).toBe("<a href=#>x</a>");
      expect(at('{% if true %}<a href="{{ subscriber.location }}">x</a>{% endif %}', location)).toBe('<a href="#">x</a>');
      expect(at('<a href="{% if true %}{{ subscriber.location }}{% endif %}">x</a>', location)).toBe('<a href="#">x</a>');
      expect(at('<a href="{% echo subscriber.location %}">x</a>', location)).toBe('<a href="#">x</a>');
      expect(at('<a href="{% cycle subscriber.location, "/b" %}">x</a><a href="{% cycle subscriber.location, "/b" %}">y</a>', location)).toBe(
        '<a href="#">x</a><a href="/b">y</a>',
      );
      // After other text or outputs, before the scheme is fixed: the value's own scheme is checked.
      expect(at('<a href="java{{ subscriber.location }}">x</a>', location)).toBe('<a href="java#">x</a>');
      expect(at('<a href="{{ subscriber.name }}{{ subscriber.location }}">x</a>', location)).toBe('<a href="&lt;b&gt;Bob&lt;/b&gt;#">x</a>');
    }
    // What is not a new scheme prints as it is: web, mail and phone links, relative ones, a value
    // after the template fixed the scheme, and anywhere that is not a URL attribute; text before its
    // colon that starts with no letter is no scheme (a time, a date).
    for (const location of ["https://example.com/a?b=c", "HTTP://x.example", "mailto:a@example.com", "tel:+331", "page.html", "/a:b", "?q=a:b", "#top", "10:30", "2026-12-01T10:30"]) {
      expect(at('<a href="{{ subscriber.location }}">x</a>', location)).toBe(`<a href="${location}">x</a>`);
    }
    // However the template puts text before the value: a branch not taken, a comment, an entity, no
    // space between attributes, a long tag: the scheme is still open, and the value is checked.
    const js = "javascript:alert(1)";
    expect(at('<a href="{% if false %}https://x.example/{% endif %}{{ subscriber.location }}">x</a>', js)).toBe('<a href="#">x</a>');
    expect(at('<a href="{% comment %}https://{% endcomment %}{{ subscriber.location }}">x</a>', js)).toBe('<a href="#">x</a>');
    expect(at('<a href="&#10;{{ subscriber.location }}">x</a>', js)).toBe('<a href="&#10;#">x</a>');
    expect(at('<a title="t"href="{{ subscriber.location }}">x</a><a/href="{{ subscriber.location }}">y</a>', js)).toBe('<a title="t"href="#">x</a><a/href="#">y</a>');
    expect(at('<a {% if subscriber.name %}target="_blank" {% endif %}href="{{ subscriber.location }}">x</a>', js)).toBe('<a target="_blank" href="#">x</a>');
    // A value glued to the attribute's name makes part of the name (`{{ v }}click=`): refused.
    expect(rejection({ html: '<a {{ subscriber.email | remove: "bob@example.com" }}href="{{ subscriber.location }}">x</a>' }).message).toContain("whose name Liquid writes");
    // Text that never renders is no markup: a comment, a raw block, an untaken branch.
    expect(at('<a {% comment %}<b>{% endcomment %} href="{{ subscriber.location }}">x</a>', js)).toBe('<a  href="#">x</a>');
    // (A branch that would end the tag only when taken is refused: see "reads each Liquid branch".)
    expect(at('{% raw %}<a title="{% endraw %}" href="{{ subscriber.location }}">x</a>', js)).toBe('<a title="" href="#">x</a>');
    expect(at('{% raw %}{{ <a title=" }}" href="{% endraw %}{{ subscriber.location }}">x</a>', js)).toBe('{{ <a title=" }}" href="#">x</a>');
    // A value before the template's own colon names the scheme: only a safe name passes.
    const split = '<a href="{{ subscriber.location | split: ":" | first }}:{{ subscriber.location | split: ":" | last }}">x</a>';
    expect(at(split, js)).toBe('<a href="#:alert(1)">x</a>');
    for (const colon of ["&#58;", "&#x3A;", "&colon;", "&#0058"]) {
      expect(at(`<a href="{{ subscriber.location }}${colon}alert(1)">x</a>`, "javascript")).toBe(`<a href="#${colon}alert(1)">x</a>`);
    }
    expect(at(split, "https://example.com")).toBe('<a href="https://example.com">x</a>');
    expect(at('<a href="{{ subscriber.location }}">x</a> Note: {{ subscriber.location }}', "note")).toBe('<a href="note">x</a> Note: note');
    const long = `<a style="${"color:red;".repeat(200)}" href="{{ subscriber.location }}">x</a>`;
    expect(at(long, js)).toBe(long.replace("{{ subscriber.location }}", "#"));
    // Safe schemes pass wherever the value lands: srcset entries, echo inside {% liquid %}.
    const https = "https://cdn.example.com/a.png";
    expect(at('<img srcset="a.png 1x, {{ subscriber.location }} 2x">', https)).toBe(`<img srcset="a.png 1x, ${https} 2x">`);
    expect(at('<img srcset="a.png 1x, {{ subscriber.location }} 2x">', js)).toBe('<img srcset="a.png 1x, # 2x">');
    expect(at('<img srcset="https://cdn.example.com/a.png 1x, {{ subscriber.location }} 2x">', js)).toBe('<img srcset="https://cdn.example.com/a.png 1x, # 2x">');
    // A value's own comma in a srcset starts a candidate of its own: checked like any URL it brings.
    const twoCandidates = (second: string) => `https://ok.example/a.png 1x, ${second} 2x`;
    for (const template of ['<img srcset="{{ subscriber.location }}">', '<img srcset="a.png 1x, {{ subscriber.location }}">', '<img srcset="https://cdn.example.com/{{ subscriber.location }}">']) {
      for (const bad of ["javascript:alert(1)", "data:image/svg+xml,x", " JaVa\tScript:x"]) {
        expect(at(template, twoCandidates(bad))).toBe(template.replace("{{ subscriber.location }}", "#"));
      }
      expect(at(template, twoCandidates("https://ok.example/b.png"))).toBe(template.replace("{{ subscriber.location }}", twoCandidates("https://ok.example/b.png")));
    }
    // The template's letters after a value, up to its colon, complete the scheme the value begins:
    // the value is the scheme's name then, and only a safe one passes (`java` + `script:`).
    for (const rest of ["script:alert(1)", "&Tab;script:alert(1)", "{% raw %}script:{% endraw %}alert(1)", "sc&#114;ipt:alert(1)", "script&colon;alert(1)", "\n script:x"]) {
      const template = `<a href="{{ subscriber.location }}${rest}">x</a>`;
      expect(at(template, "java")).toBe(`<a href="#${rest.replace("{% raw %}", "").replace("{% endraw %}", "")}">x</a>`);
      expect(at(template, "https")).toContain('href="https');
    }
    // Text a Liquid tag may leave out ends nothing (a branch not taken prints none of it), nor does
    // text too long to read: the value stays the scheme's name.
    for (const rest of ["{% if false %}/{% endif %}script:x", "{% unless true %}?{% endunless %}script:x", "{% for t in subscriber.tags limit: 0 %}#{% endfor %}script:x", `{% comment %}${"x".repeat(8_200)}{% endcomment %}script:x`, `${"\n".repeat(9_000)}script:x`]) {
      expect(at(`<a href="{{ subscriber.location }}${rest}">x</a>`, "java")).toMatch(/^<a href="#/);
    }
    // Nor does a quote or > other than the attribute's own end, in such a branch.
    for (const rest of ["{% if false %}'{% endif %}script:x", "{% if false %}>{% endif %}script:x", "{% if true %}{% else %}/{% endif %}script:x", "{% capture c %}/{% endcapture %}script:x"]) {
      expect(at(`<a href="{{ subscriber.location }}${rest}">x</a>`, "java")).toMatch(/^<a href="#/);
    }
    expect(at(`<a href='{{ subscriber.location }}{% if false %}"{% endif %}script:x'>x</a>`, "java")).toMatch(/^<a href='#/);
    // Only Liquid's own tags count: one spelled in a string or a comment opens and closes nothing.
    for (const fake of ['{{ "{% endif %}" }}', '{% assign z = "{% endif %}" %}', "{% comment %}{% endif %}{% endcomment %}"]) {
      expect(at(`<a href="{{ subscriber.location }}{% if false %}${fake}/{% endif %}script:alert(1)">x</a>`, "java")).toMatch(/^<a href="#/);
    }
    // After an earlier output, the template's own ? does not settle the scheme for a later value, but
    // a time or a date there brings none.
    expect(at('<a href="{{ subscriber.name }}/events?day={{ subscriber.location }}">x</a>', "2026-12-01T10:30")).toBe('<a href="&lt;b&gt;Bob&lt;/b&gt;/events?day=2026-12-01T10:30">x</a>');
    // A break or continue after the value jumps past the text after it, wherever it stands.
    for (const cut of ["{% if true %}{% break %}{% endif %}", "{% if true %}{% continue %}{% endif %}", "{% liquid break %}"]) {
      const template = `<a href="{% for i in (1..1) %}{{ subscriber.location }}${cut}/{% endfor %}script:alert(1)">x</a>`;
      expect(at(template, "java")).toBe('<a href="#script:alert(1)">x</a>');
    }
    // A loop around the value inside the attribute prints its body's start after the value again.
    const loop = '<a href="{% for i in (1..2) %}{% if forloop.first %}{% else %}script:{% endif %}{{ subscriber.location }}{% endfor %}">x</a>';
    expect(at(loop, "java")).toBe('<a href="#script:#">x</a>');
    // Another branch of the value's own block never prints after it; in a block opened after it, text
    // that ends a scheme ends its own branch's reading.
    expect(at('<a href="{% if subscriber.location %}{{ subscriber.location }}{% else %}https://acme.example{% endif %}/events">x</a>', "events.html")).toBe('<a href="events.html/events">x</a>');
    expect(at('<a href="{{ subscriber.location }}{% if true %}?slot=2026-12-01T10:30{% endif %}">x</a>', "events.html")).toBe('<a href="events.html?slot=2026-12-01T10:30">x</a>');
    expect(at('<a href="{{ subscriber.location }}{% if true %}?utm=1{% endif %}{% if true %}&t=10:30{% endif %}">x</a>', "de")).toBe('<a href="de?utm=1&t=10:30">x</a>');
    expect(at('<a href="{{ subscriber.location }}{% if false %}?{% endif %}script:x">x</a>', "java")).toBe('<a href="#script:x">x</a>');
    // Text after the block closes prints whenever the value does: a / ? or # there ends the scheme.
    expect(at('<a href="{{ subscriber.location }}{% if true %}?utm=1{% endif %}#t=10:30">x</a>', "events.html")).toBe('<a href="events.html?utm=1#t=10:30">x</a>');
    expect(at('<a href="{{ subscriber.location }}{% if false %}/vip{% endif %}/events?at=10:30">x</a>', "www.acme.example")).toBe('<a href="www.acme.example/events?at=10:30">x</a>');
    // In a srcset, the value's last candidate is what the template's text completes.
    expect(at('<img srcset="{{ subscriber.location }}script:alert(1)">', "a.png 1x, java")).toBe('<img srcset="#script:alert(1)">');
    expect(at('<picture><source srcset="{{ subscriber.location }}ta:x"></picture>', "a.png 1x, da")).toBe('<picture><source srcset="#ta:x"></picture>');
    // Text that ends the scheme's reading first (a /, ?, # or the attribute's end) leaves the value open.
    expect(at('<a href="{{ subscriber.location }}.html?a=b:c">x</a>', "page")).toBe('<a href="page.html?a=b:c">x</a>');
    expect(at('<a href="{{ subscriber.location }}/x:y">x</a>', "java")).toBe('<a href="java/x:y">x</a>');
    expect(at('<a href="{% liquid echo subscriber.location %}">x</a>', https)).toBe(`<a href="${https}">x</a>`);
    expect(at('<a href="{% liquid echo subscriber.location %}">x</a>', js)).toBe('<a href="#">x</a>');
    expect(at('<a href="https://example.com/?q={{ subscriber.location }}">x</a>', "javascript:alert(1)")).toBe('<a href="https://example.com/?q=javascript:alert(1)">x</a>');
    expect(at('<a title="{{ subscriber.location }}" href="/">x</a><p>{{ subscriber.location }}</p>', "javascript:1")).toBe(
      '<a title="javascript:1" href="/">x</a><p>javascript:1</p>',
    );
  });

  it("reads a tag as a browser does: a < or a quote inside an earlier quoted value starts nothing", () => {
    const at = ownPart;
    const js = "javascript:alert(1)";
    expect(at('<a title="Write to <news@example.com>" href="{{ subscriber.location }}">x</a>', { location: js })).toBe(
      '<a title="Write to <news@example.com>" href="#">x</a>',
    );
    expect(at('<a title="Write to <news@example.com>" href={{ subscriber.location }}>x</a>', { location: js })).toBe('<a title="Write to <news@example.com>" href=#>x</a>');
    expect(at('<a title="<b>" class={{ subscriber.name }} href="/">x</a>', { name: "x onmouseover=alert(1)" })).toBe(
      '<a title="<b>" class=x&#32;onmouseover&#61;alert(1) href="/">x</a>',
    );
    // A quote inside an unquoted value pairs with nothing: `'>'` is the next attribute's quoted value.
    expect(at("<a title=x' y=\"'>'\" href=\"{{ subscriber.location }}\">x</a>", { location: js })).toBe("<a title=x' y=\"'>'\" href=\"#\">x</a>");
    // Handlers stay refused whatever stands before them in the tag.
    expect(rejection({ html: '<a title="<b>" onclick="this.title=\'{{ subscriber.name }}\'" href="/">x</a>' }).message).toContain("event-handler attribute");
    expect(rejection({ html: '<img alt="icon <i>" src="a.png" onerror="this.title=\'{{ subscriber.name }}\'">' }).message).toContain("event-handler attribute");
    // A comment holds no tags: markup in it opens nothing.
    expect(at('<!-- <a href=" --><p>{{ subscriber.location }}</p>', { location: js })).toBe(`<!-- <a href=" --><p>${js}</p>`);
    // Only HTML's own whitespace separates: a no-break space after = starts an unquoted value.
    expect(at('<a title=\u00a0"x>y</a><a class={{ subscriber.name }}>z</a>', { name: "x onmouseover=alert(1)" })).toContain("<a class=x&#32;onmouseover&#61;alert(1)>");
    // `</` before anything but a letter is a bogus comment to its first `>`: quotes in it open nothing.
    expect(at('</3 title="><a class={{ subscriber.name }}>x</a>">', { name: "x onmouseover=alert(1)" })).toContain("<a class=x&#32;onmouseover&#61;alert(1)>");
  });

  it("reads each Liquid branch as a browser reads what it prints: one that opens or closes a tag, quote or comment only when taken refuses every value after it", () => {
    const refused = (html: string) => expect(rejection({ html }).message, html).toContain("after markup that readers would read differently");
    refused('<a title=x{% if subscriber.tags contains "vip" %}>{% endif %} class={{ subscriber.name }} href="https://example.com/">x</a>');
    refused('<a {% if subscriber.tags contains "vip" %}title="{% endif %} class={{ subscriber.name }} x="y">x</a>');
    refused('{% if subscriber.tags contains "vip" %}<!--{% endif %}<a class={{ subscriber.name }}>x</a>-->');
    refused('{% if false %}<a title="{% endif %}<a class={{ subscriber.name }}>x</a>');
    refused('{% case subscriber.source %}{% when "x" %}<a title="{% endcase %}<a class={{ subscriber.name }}>x</a>');
    refused('{% for t in subscriber.tags %}<a title="{% if t == "vip" %}{% break %}{% endif %}">x</a>{% endfor %}<a class={{ subscriber.name }}>y</a>');
    refused('{% capture open %}<a title="{% endcapture %}<p class={{ subscriber.name }}>x</p>');
    // tablerow writes markup of its own: inside a tag it ends or splits it.
    refused('<a title="{% tablerow t in subscriber.tags %}{{ t }}{% endtablerow %}" class={{ subscriber.name }}>x</a>');
    // What follows the block ends the tag in one reading only: not alike.
    refused('<p {% if subscriber.name %}title="{% endif %}>a <b title=">{{ subscriber.name }}</b>');
    // The message names where that markup begins, as well as the value's line.
    expect(rejection({ html: '<p>\n<noscript><p title="</noscript>\n<img src=x alt={{ subscriber.name }}>">' }).message).toMatch(/\(that markup begins on line 2\) on line 3$/);
    // What readers disagree on: a noscript (text with scripting, markup without), text elements in SVG.
    refused('<noscript><p title="</noscript><img src=x alt={{ subscriber.name }}>">');
    refused('<svg><style>/* <a title=" */</style><a class={{ subscriber.name }}>x</a></svg>');
    refused('<svg><![CDATA[ > <a title=" ]]><a class={{ subscriber.name }}><text>x</text></a>"></svg>');
    // Liquid that splits an element's name leaves which element it is (a textarea?) to the rendering.
    refused('<t{% comment %}{% endcomment %}extarea><img title="</textarea><a class={{ subscriber.name }}>x</a>">');
    refused('<textarea>{% if subscriber.tags contains "vip" %}</textarea>{% endif %}<img title="</textarea><a class={{ subscriber.name }}>x</a>">');
    // A comment block whose body liquidjs reads on past the first {% endcomment %} (one inside a string).
    refused('{% comment %}{{ "{% endcomment %}" }}<a title="{% endcomment %}<a class={{ subscriber.name }}>x</a>');
    // Branches that are complete markup, inside a tag or a value too, are fine, as are values before an uneven branch.
    for (const html of [
      '{% if subscriber.name %}<p class="vip">VIP</p>{% else %}<p>Hi</p>{% endif %}<a href="{{ subscriber.location }}">x</a>',
      '<a class="btn{% if subscriber.name %} btn-vip{% endif %}" {% if subscriber.name %}target="_blank" {% endif %}href="{{ subscriber.location }}">x</a>',
      '<a href="{% if subscriber.name %}https://a.example{% else %}https://b.example{% endif %}/{{ subscriber.location }}">x</a>',
      '{% if subscriber.name %}<a href="{% if subscriber.location %}https://a.example{% else %}https://b.example{% endif %}">Go</a>{% endif %}',
      '<ul>{% for t in subscriber.tags %}<li title="{{ t }}">{{ t }}</li>{% endfor %}</ul>',
      '<table>{% tablerow t in subscriber.tags cols: 2 %}<b title="{{ t }}">{{ t }}</b>{% endtablerow %}</table><p>{{ subscriber.name }}</p>',
      '<title>{{ subscriber.name }} &lt;news@example.com&gt;</title><p>{{ subscriber.name }}</p>',
      '<p>{{ subscriber.name }}</p>{% if subscriber.name %}<!--{% endif %}',
      // CSS wrapped in a comment, as older email templates write it; HTML text elements holding markup-like text.
      '<style type="text/css"><!-- p { color: red; } --></style><p title="{{ subscriber.name }}">t</p>',
      '<title>{{ subscriber.name }} <news@example.com></title><p>{{ subscriber.name }}</p>',
      // A branch that ends in another state of the same tag, read alike from the block's end.
      '<table><tr><td {% if subscriber.name %}nowrap{% endif %} title="{{ subscriber.name }}">x</td></tr></table>',
      // The README's way around the cautious refusal of an unquoted value each branch writes.
      '<table><tr><td width="{% if subscriber.name %}600{% else %}480{% endif %}" title="{{ subscriber.name }}">x</td></tr></table>',
    ]) {
      expect(() => validateCampaignContent(content({ html })), html).not.toThrow();
    }
  });

  it("reads HTML text elements, silent Liquid, whitespace control and captures as the rendering does", () => {
    const at = (template: string, name: string) => ownPart(template, { name });
    const attack = "x onmouseover=alert(1)";
    // A title is text to its end tag: the img after it is markup, its value kept inside its attribute.
    expect(at('<title>What\'s new <b title="</title><img src=x alt={{ subscriber.name }}>', attack)).toContain("alt=x&#32;onmouseover&#61;alert(1)");
    // Liquid that prints nothing right after = leaves the value to what follows: an empty unquoted value prints "".
    expect(rejection({ html: '<td width={% if subscriber.tags contains "vip" %}600{% endif %} title="{{ subscriber.name }}">x</td>' }).message).toContain("after markup that readers would read differently");
    const empty = render({ html: '<a href={{ subscriber.location }}{% if false %} class=vip{% endif %} title="{{ subscriber.name }}">x</a>' }, { ...bob, location: "", name: attack }).html;
    expect(empty).toContain('<a href="" title="x onmouseover=alert(1)">');
    // Whitespace a `-` trims is not there: an unquoted value glued to the next attribute, `< b` becoming `<b`.
    expect(rejection({ html: '<a title=x {%- if false -%}{%- endif -%} class="{{ subscriber.name }}">x</a>' }).message).toContain("whose name Liquid writes");
    expect(at('<p>a < {%- if false -%}{%- endif -%} b class={{ subscriber.name }}>x</b></p>', attack)).toContain("class=x&#32;onmouseover&#61;alert(1)");
    expect(rejection({ html: '<s {%- if false -%}{%- endif -%} {{ subscriber.source }}>alert(1)</s>' }).message).toContain("tag's name");
    // A capture prints as made in text only: in an attribute or a comment its quotes and `-->` are escaped.
    expect(at("{% capture t %}Editor's picks for {{ subscriber.name }}{% endcapture %}<img alt='{{ t }}' src=\"https://example.com/a.png\">", attack)).toContain(
      "alt='Editor&#39;s picks for x onmouseover=alert(1)'",
    );
    expect(at("{% capture c %}-->{% endcapture %}<!-- {{ c }}<a class={{ subscriber.name }}>x</a> -->", attack)).toMatch(/^<!-- --&#62;<a class=x onmouseover=alert\(1\)>x<\/a> -->$/);
    // In an attribute, a capture keeps its entities (shown as they read) and escapes its quotes, once.
    expect(at("{% capture t %}O'Brien &amp; Co{% endcapture %}<img alt='{{ t }}' src=\"https://example.com/a.png\">", attack)).toContain("alt='O&#39;Brien &amp; Co'");
    // A capture made where markup may not begin (in a comment, an attribute, a title) refuses the values after it.
    expect(rejection({ html: "<!-- {% capture b %}<a class={{ subscriber.name }}>x</a>{% endcapture %} -->{{ b }}" }).message).toContain("after markup that readers would read differently");
    // A script holding `<!--` (escaped states where `</script>` may not end it) refuses the values after it.
    expect(rejection({ html: "<script><!--<script></script>\n{{ subscriber.name }}\n--></script>" }).message).toContain("after markup that readers would read differently");
    // `=` before an attribute's name starts the name, as a browser reads it.
    expect(at('<a =" class={{ subscriber.name }} x=">x</a>', attack)).not.toContain(" onmouseover=alert(1)");
  });

  it("refuses a value where no escaping makes it safe: a tag's name, srcdoc, SVG animation, base, link, script and meta refresh", () => {
    const refused = (html: string, words: string) => expect(rejection({ html }).message, html).toContain(words);
    refused("<{{ subscriber.source }}>x</{{ subscriber.source }}>", "into a tag's name");
    refused("<s{{ subscriber.source }}>x</s>", "into a tag's name");
    refused('<iframe srcdoc="{{ subscriber.name }}"></iframe>', "into srcdoc");
    refused('<svg><a href="/"><animate attributeName="href" values="{{ subscriber.location }}"/>x</a></svg>', "SVG animation");
    refused('<svg><set attributeName="href" to="{{ subscriber.location }}"/></svg>', "SVG animation");
    refused('<meta http-equiv="refresh" content="0;url={{ subscriber.location }}">', "<meta http-equiv>");
    refused('<meta content="0;url={{ subscriber.location }}"http-equiv="refresh">', "<meta http-equiv>");
    refused('<meta/http-equiv="refresh" content="0;url={{ subscriber.location }}">', "<meta http-equiv>");
    refused('<meta {% if true %}http-equiv{% endif %}="refresh" content="0;url={{ subscriber.location }}">', "<meta http-equiv>");
    refused('<base href="{{ subscriber.location }}">', "<base>");
    refused('<link rel="stylesheet" href="{{ subscriber.location }}">', "<link>");
    refused('<script src="{{ subscriber.location }}"></script>', "<script>");
    // A meta without http-equiv, and the element names in text, are fine.
    expect(() => validateCampaignContent(content({ html: '<meta name="description" content="{{ subscriber.name }}"><p>base link {{ subscriber.name }}</p>' }))).not.toThrow();
  });

  it("prints into CSS only a value that is one (a colour, a size, a font): nothing that ends the declaration or loads anything", () => {
    const at = (template: string, name: string) => ownPart(template, { name });
    expect(at('<p style="color:{{ subscriber.name }}">t</p>', "#3366FF")).toBe('<p style="color:#3366FF">t</p>');
    expect(at('<p style="font-family:{{ subscriber.name }}">t</p>', "Helvetica Neue, Arial")).toBe('<p style="font-family:Helvetica Neue, Arial">t</p>');
    expect(at("<p style=width:{{ subscriber.name }}>t</p>", "50 %")).toBe("<p style=width:50&#32;%>t</p>");
    expect(at("<style>p { color: {{ subscriber.name }} }</style><p>t</p>", "red")).toBe("<style>p { color: red }</style><p>t</p>");
    // Colours, font lists, sizes, gradients: functions that load nothing, quotes (as references in an attribute, as is in a style element).
    expect(at('<p style="color:{{ subscriber.name }}">t</p>', "rgb(26, 115, 232)")).toBe('<p style="color:rgb(26, 115, 232)">t</p>');
    expect(at('<p style="font-family:{{ subscriber.name }}">t</p>', "'Open Sans', Arial")).toBe('<p style="font-family:&#39;Open Sans&#39;, Arial">t</p>');
    expect(at("<style>p { font-family: {{ subscriber.name }} }</style><p>t</p>", "'Open Sans', Arial")).toBe("<style>p { font-family: 'Open Sans', Arial }</style><p>t</p>");
    expect(at('<p style="width:{{ subscriber.name }}">t</p>', "calc(100% - 20px) !important")).toBe('<p style="width:calc(100% - 20px) !important">t</p>');
    expect(at('<p style="background:{{ subscriber.name }}">t</p>', "linear-gradient(#fff, #000)")).toBe('<p style="background:linear-gradient(#fff, #000)">t</p>');
    for (const attack of ["red;background:url(https://evil.example/s)", "red}*{background:red", "@import url(x.css)", "expression(alert(1))", "url(javascript:alert(1))", "url(x.png)", "image-set(x.png 1x)", 'red" onclick="x', "red\\3b", "red</style><script>", "//evil.example/x.png", "red /* x", "'Open Sans"]) {
      expect(at('<p style="color:{{ subscriber.name }}">t</p>', attack), attack).toBe('<p style="color:">t</p>');
      expect(at("<style>p { color: {{ subscriber.name }} }</style><p>t</p>", attack), attack).toBe("<style>p { color:  }</style><p>t</p>");
    }
    // Outside CSS, the same value is text as ever.
    expect(at('<p title="{{ subscriber.name }}">{{ subscriber.name }}</p>', "a;b:url(c)")).toBe('<p title="a;b:url(c)">a;b:url(c)</p>');
  });
});
