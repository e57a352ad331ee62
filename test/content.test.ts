import fc from "fast-check";
import { Token, TokenKind } from "liquidjs";
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

/** The template's own part of the html rendered for bob with `over`: what comes before the footer. */
const ownPart = (template: string, over: Partial<Recipient>) => {
  const html = render({ html: template }, { ...bob, ...over }).html ?? "";
  return html.slice(0, html.indexOf("<div"));
};

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

  it("prints a capture as it was made in html: its outputs escaped once, its markup kept", () => {
    const m = render({ html: "{% capture greeting %}<b>Hi</b> {{ subscriber.name }}{% endcapture %}<p>{{ greeting }}</p><p>{{ greeting | default: 'x' }}</p>" });
    expect(m.html).toContain("<p><b>Hi</b> &lt;b&gt;Bob&lt;/b&gt;</p><p><b>Hi</b> &lt;b&gt;Bob&lt;/b&gt;</p>");
    // The text derived from it captures text: nothing escaped there.
    expect(m.text).toMatch(/^Hi <b>Bob<\/b>/);
    // Only what a capture made is printed as it is; the raw value it was made from is escaped as ever.
    const own = render({ html: "{% capture n %}{{ subscriber.name }}{% endcapture %}<p>{{ subscriber.name }}</p>" }, { ...bob, name: "<i>x</i>" });
    expect(own.html).toContain("<p>&lt;i&gt;x&lt;/i&gt;</p>");
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
    // after the template fixed the scheme, and anywhere that is not a URL attribute.
    for (const location of ["https://example.com/a?b=c", "HTTP://x.example", "mailto:a@example.com", "tel:+331", "page.html", "/a:b", "?q=a:b", "#top"]) {
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
    expect(m.text).toBe(`Paris bob@example.com vip,beta import Weekly Notes FRIEND ${URL}\n\n--\n1 Main Street, Springfield`);
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

  it("gives an html with no text of its own (images only, or blank) the preheader, else the subject, as its text part", () => {
    const footer = `\n\n--\nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}\n1 Main Street, Springfield`;
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

  it("puts no line break or control character into the Subject, whichever source it comes from; the footer names the newsletter on one line", () => {
    // A name stored before names had to be one line: the fallback subject is folded like a rendered one.
    const crlf = { name: "Line one\r\nBcc: x@example.com", address: null };
    const m = renderMessage(compileCampaign(content({ subject: "{{ subscriber.location }}", html: "<p>x</p>" }), crlf), { ...bob, location: null }, URL);
    expect(m.subject).toBe("Line one Bcc: x@example.com");
    expect(m.text).toContain("you subscribed to Line one Bcc: x@example.com.\n");
    expect(m.html).toContain("you subscribed to Line one Bcc: x@example.com.");
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
    expect(crlf.text).toContain("Hello bob@example.com\nLine two\n\nBye\n\n--\n");
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
    expect(m.text).toBe(`Plain body\n\n--\nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}\n1 Main Street, Springfield`);
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
    // No fixed grey: the text (and its link) take the template's colour, lighter.
    expect(footer).not.toMatch(/(?<!-)color:#/);
    expect(footer).toMatch(/opacity:0\.75/);
    expect(footer).toContain('style="color:inherit;text-decoration:underline">Unsubscribe</a>');
    expect(footer).toContain("You’re receiving this email because you subscribed to Weekly Notes.");
    expect(m.text).toContain("\n--\nYou’re receiving this email because you subscribed to Weekly Notes.\n");
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
    expect(m.text).toBe(`Body leave <${URL}>\n\n--\n1 Main Street, Springfield`);
    // The same through liquidjs's renderer (a tag in the part), and from the rendered html.
    expect(render({ html: `<body>{% if true %}<p>Body <a href="{{ unsubscribe_url }}">leave</a></p>{% endif %}</body>` }).html).toMatch(addressOnly);
    expect(render({ html: '<body><p class="{% if true %}a{% endif %}">Body <a href="{{ unsubscribe_url }}">leave</a></p></body>' }).text).toMatch(/\n\n--\n1 Main Street, Springfield$/);
    // A written text part that places the link but not the address.
    expect(render({ html: own, text: "Body. Leave: {{ unsubscribe_url }}" }).text).toBe(`Body. Leave: ${URL}\n\n--\n1 Main Street, Springfield`);
    // Lines kept.
    const lines = renderMessage(compileCampaign(content({ html: own }), { name: "N", address: "1 Main St\r\nSpringfield" }), bob, URL);
    expect(lines.html).toContain(">1 Main St<br>\nSpringfield</p></div></body>");
    expect(lines.text).toMatch(/\n--\n1 Main St\nSpringfield$/);
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
  });

  it("decides the footer per message: a link in a branch not taken, or assigned and never shown, still gets it", () => {
    const footer = /Unsubscribe<\/a>.*1 Main Street/s;
    const branch = '<p>Hi</p>{% if subscriber.location == "Paris" %}<a href="{{ unsubscribe_url }}">leave</a>{% endif %}';
    const paris = render({ html: branch });
    expect(paris.html).not.toMatch(footer);
    expect(paris.text).toBe(`Hi\n\nleave <${URL}>\n\n--\n1 Main Street, Springfield`);
    const elsewhere = render({ html: branch }, { ...bob, location: "Rome" });
    expect(elsewhere.html).toMatch(footer);
    expect(elsewhere.text).toContain(`\n--\nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}`);
    for (const html of ["<p>x</p>{% if false %}{{ unsubscribe_url }}{% endif %}", "{% assign u = unsubscribe_url %}<p>x</p>"]) {
      expect(render({ html }).html).toMatch(footer);
    }
    const text = render({ text: "Body{% if subscriber.location == 'Rome' %} {{ unsubscribe_url }}{% endif %}" }).text;
    expect(text).toContain(`--\nYou’re receiving this email because you subscribed to Weekly Notes.\nUnsubscribe: ${URL}`);
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

  it("keeps mailto: links' scheme in the text part, and reads a table with header cells as rows, a layout table as blocks", () => {
    const mail = render({ html: '<p>Write to <a href="mailto:editor@example.com?subject=Issue%2042&amp;body=Hi">the editor</a> or <a href="tel:+15551234567">call</a></p>' });
    expect(mail.text).toMatch(/^Write to the editor <mailto:editor@example\.com\?subject=Issue%2042&body=Hi> or\s+call <tel:\+15551234567>/);
    const data = render({ html: "<table><tr><th>Item</th><th>Qty</th></tr><tr><td>Chair</td><td>2</td></tr><tr><td>Stool</td><td>{{ subscriber.location }}</td></tr></table>" });
    expect(data.text).toMatch(/^Item +Qty\nChair +2\nStool +Paris\n/);
    const layout = render({ html: '<table width="100%"><tr><td><p>One</p></td><td><p>Two</p></td></tr></table>' });
    expect(layout.text).toMatch(/^One\n\nTwo\n/);
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
    // A number Liquid cannot read is said to be one, not shown as the variable Liquid takes it for.
    expect(rejection({ text: "{{ 2 | times: 1e308 }}" }).message).toBe('text: "1e308" is not a number Liquid reads on line 1 (write numbers as digits with an optional point, without an exponent)');
    expect(rejection({ subject: "{{ campaign.subject }}" }).param).toBe("subject");
    expect(rejection({ preheader: "{{ subscriber }}" }).message).toContain('unknown variable "subscriber" on line 1');
  });

  it("names the line of a problem deep in a large template (positions found from the line starts, as liquidjs counts them)", () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `<p>{{ subscriber.name }} ${i}</p>`);
    lines[4321] = "<p>{{ subscriber.nmae }}</p>";
    expect(rejection({ html: lines.join("\r\n") }).message).toContain('unknown variable "subscriber.nmae" on line 4322');
    // Lines end at \n, \r\n or a lone \r: an old-Mac template names its lines too.
    expect(rejection({ html: "a\rb\r{{ subscriber.nmae }}\r" }).message).toContain("on line 3");
    // The row and column of a character-by-character scan (liquidjs's own, with \r\n and \r as breaks too), for drawn texts and offsets.
    const reference = (input: string, begin: number) => {
      let [row, col] = [1, 1];
      for (let i = 0; i < begin; i++) {
        const breaks = input[i] === "\n" || (input[i] === "\r" && input[i + 1] !== "\n");
        [row, col] = breaks ? [row + 1, 1] : [row, col + 1];
      }
      return [row, col];
    };
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("a", "\n", "\r", "{", " ") }), fc.nat(), (input, n) => {
        const begin = input.length === 0 ? 0 : n % (input.length + 1);
        const token = new (class extends Token {})(TokenKind.HTML, input, begin, input.length);
        expect(token.getPosition()).toEqual(reference(input, begin));
      }),
    );
  });

  it("lists every problem in details: each field's, and every unknown variable of one field, in line order", () => {
    let error: ApiError | undefined;
    try {
      validateCampaignContent(content({ subject: "{{ a }}", html: "<p>{{ b }}</p>\n<p>{{ subscriber.nmae }}</p>", text: "{% if %}" }));
    } catch (err) {
      error = err as ApiError;
    }
    expect(error?.param).toBe("subject");
    expect(error?.details?.map((d) => [d.param, d.message.replace(/; known: .*/, "")])).toEqual([
      ["subject", 'unknown variable "a" on line 1'],
      ["html", 'unknown variable "b" on line 1'],
      ["html", 'unknown variable "subscriber.nmae" on line 2'],
      ["text", expect.stringContaining("line 1")],
    ]);
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

  it("bounds the work of checking a template: at most 10,000 Liquid tags and outputs, and no value far into a tag", () => {
    expect(rejection({ html: `<p>${"{{ subscriber.name }}".repeat(10_001)}</p>` })).toEqual({
      param: "html",
      message: "html: the template holds more than 10000 Liquid tags and outputs",
    });
    expect(() => validateCampaignContent(content({ html: `<p>${"{{ subscriber.name }}".repeat(2_000)}</p>` }))).not.toThrow();
    // Read from the tag's `<`: a value more than 8 KB into a tag is refused, naming its line.
    expect(rejection({ html: `<p title="${"x".repeat(9_000)}\n{{ subscriber.name }}">t</p>` }).message).toMatch(/more than 8 KB into a tag .* on line 2$/);
    // `a < b` opens no tag: values after it are text, however far.
    const text = render({ html: `<p>a < b ${"x".repeat(9_000)} {{ subscriber.name }}</p>` }, { ...bob, name: "c = d" }).html ?? "";
    expect(text).toContain(" c = d</p>");
  });

  it("says a template nests too deeply in its own words, not the engine's", () => {
    const deep = `${"{% if true %}".repeat(4_999)}x${"{% endif %}".repeat(4_999)}`;
    const problem = rejection({ text: deep });
    expect(problem.param).toBe("text");
    expect(problem.message).toContain("the template nests too deeply");
    expect(problem.message).not.toMatch(/call stack/i);
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

  it("bounds the work of a loop whose passes allocate nothing: rejected when saved, quickly", () => {
    // 199,000 passes of 50 ifs (a 1.3 KB template) took 27 s of CPU to check before work was counted.
    const busy = `{% for i in (1..1000) %}{% for j in (1..199) %}${"{% if j > 1000 %}{% endif %}".repeat(50)}{% endfor %}{% endfor %}ok`;
    for (const field of ["html", "text", "subject"] as const) {
      const started = performance.now();
      const e = rejection({ [field]: busy });
      expect(e.param).toBe(field);
      expect(e.message).toContain("takes more than 20000 steps to render");
      expect(performance.now() - started).toBeLessThan(5_000); // (a loose guard against the 27 s, not a timing target)
    }
    // A loop over a whole range doing a little each pass is well within it.
    expect(() => validateCampaignContent(content({ text: "{% for i in (1..1000) %}{% if i > 5 %}{{ i }}{% endif %}{% endfor %}" }))).not.toThrow();
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
