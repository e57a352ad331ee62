import fc from "fast-check";
import { Token, TokenKind } from "liquidjs";
import { describe, expect, it } from "vitest";
import { ApiError } from "../src/errors/api-error";
import { CONTENT_LIMITS, validateCampaignContent } from "../src/content";
import { bob, content, rejection, render } from "./content.fixtures";

/** Saving `fields` as a campaign's content passes every check (`label`: which case, when several are tried). */
const accepted = (fields: Parameters<typeof content>[0], label?: string) => expect(() => validateCampaignContent(content(fields)), label).not.toThrow();

describe("template errors (400 validation_failed naming the field, the line and the problem)", () => {
  /** What saving `text` as a campaign's text part answers. */
  const said = (text: string) => rejection({ text }).message;

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

  it("refuses a variable named by another's value ([k]): no check could see what it reads", () => {
    const e = rejection({ subject: '{% assign k = "subscriber" %}\n{{ [k].id }}' });
    expect(e.param).toBe("subject");
    expect(e.message).toContain('"[k]" on line 2 names a variable by the value of "k"');
    // Wherever its lines end: \r\n, or a lone \r.
    for (const lineEnd of ["\r\n", "\r", "\n\r\r"]) {
      expect(rejection({ html: `<p>\n{% assign k = "subscriber" %}${lineEnd}{{ [k].email }}` }).message).toMatch(/"\[k\]" on line \d names a variable/);
    }
    // In every place a value goes: a condition, a filter's argument, a loop, a case, a {% liquid %} tag.
    for (const html of [
      '{% capture k %}_blocks{% endcapture %}{% if [ k ] %}x{% endif %}',
      '{% assign k = "_blocks" %}{{ "a" | append: [k].footer_html }}',
      '{% assign k = "subscriber" %}{% for x in [k] %}{{ x }}{% endfor %}',
      '{% assign k = "subscriber" %}{% case [k] %}{% when 1 %}x{% endcase %}',
      '{% assign k = "subscriber" %}{% liquid\necho [k]\n%}',
      "{% for k in subscriber.tags %}{{ [k] }}{% endfor %}",
    ]) {
      expect(rejection({ html }).message, html).toMatch(/"\[k\]" on line \d+ names a variable by the value of "k"/);
    }
    // A loop's own object read past its properties is refused, in a branch the sample takes or not.
    for (const html of [
      "{% for t in subscriber.tags %}{{ forloop.constructor }}{% endfor %}",
      '{% for t in subscriber.tags %}{% if t == "vip" %}{{ forloop.next }}{% endif %}{% endfor %}',
      "{% tablerow t in subscriber.tags %}{{ tablerowloop.i }}{% endtablerow %}",
    ]) {
      expect(rejection({ html }).message, html).toMatch(/"(forloop|tablerowloop)\.\w+" on line 1 is not a property of (forloop|tablerowloop) \(it has index, /);
    }
    // Through another name the check cannot follow, such a read is nothing, on save and at send alike:
    // it neither fails a recipient's message nor moves the loop on.
    for (const html of [
      "{% for t in subscriber.tags %}{% assign f = forloop %}[{{ f.constructor }}{{ f.next }}{{ f.i }}{{ f.valueOf }}{{ forloop.index }}]{% endfor %}",
      '{% for t in subscriber.tags %}{% if t == "none" %}{% assign f = forloop %}{{ f.constructor }}{% endif %}[{{ forloop.index }}]{% endfor %}',
    ]) {
      accepted({ html }, html);
      expect(render({ html }).html, html).toContain("[1][2]");
      expect(render({ html }, { ...bob, tags: ["none", "x"] }).html, html).toContain("[1][2]");
    }
    expect(render({ html: "{% tablerow t in subscriber.tags %}{% assign f = tablerowloop %}{{ f.constructor }}{{ f.col }}{% endtablerow %}" }).html).toMatch(/>1<\/td>.*>2<\/td>/s);
    accepted({ html: "{% for t in subscriber.tags %}{{ forloop.index }}{{ forloop.rindex0 }}{{ forloop.last }}{{ forloop.length }}{% endfor %}{% tablerow t in subscriber.tags cols:2 %}{{ tablerowloop.col_first }}{{ tablerowloop.row }}{% endtablerow %}" });
    // A name written out in quotes is checked as any other.
    accepted({ html: '{{ ["subscriber"].email }} {{ subscriber["name"] }}' });
    expect(rejection({ html: '{{ ["subscriber"].id }}' }).message).toContain('unknown variable "subscriber.id"');
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

  it("refuses an expression the engine would read as another (an operator missing a value, two values with none between them), which would send every recipient the wrong branch", () => {
    expect(said("[{% if subscriber.email and %}yes{% else %}no{% endif %}]")).toBe(
      'text: "subscriber.email and" ends with "and", which needs a value after it on line 1',
    );
    expect(said("a\n{% if subscriber.email == %}yes{% endif %}")).toBe('text: "subscriber.email ==" ends with "==", which needs a value after it on line 2');
    expect(said("{% if subscriber.email != %}yes{% endif %}")).toContain('ends with "!="');
    expect(said("{{ subscriber.email subscriber.name }}")).toBe(
      'text: "subscriber.email subscriber.name" has two values with no operator between them (==, !=, <, >, <=, >=, contains, and, or) on line 1',
    );
    expect(said("{% if subscriber.name > > 3 %}x{% endif %}")).toContain('has ">" without a value before it');
    expect(said("{% if subscriber.name == 'a' or %}x{% endif %}")).toContain('ends with "or"');
    expect(said("{% if subscriber.name %}x{% elsif and subscriber.email %}y{% endif %}")).toContain('has "and" without a value before it');
    expect(said("{% unless subscriber.name contains %}x{% endunless %}")).toContain('ends with "contains"');
    expect(said("{% assign n = subscriber.name subscriber.email %}{{ n }}")).toContain("two values with no operator");
    expect(said("{% case subscriber.email %}{% when %}W{% else %}E{% endcase %}")).toBe(
      "text: a {% when %} of the {% case %} on line 1 names no value to compare with",
    );
    expect(said("{{ subscriber.email | }}")).toBe('text: a "|" on line 1 has no filter name after it');
    // What the engine would stop before and ignore.
    expect(said('{% if subscriber.email, subscriber.name == "Bob" %}T{% endif %}')).toBe(
      'text: ", subscriber.name == \"Bob\"" on line 1 follows a complete value, and the engine would ignore it (to compare, join values with an operator)',
    );
    expect(said('[{{ subscriber.name, "x" }}]')).toContain('", \"x\"" on line 1 follows a complete value');
    expect(said('{% assign x = subscriber.name, "Bob" %}{{ x }}')).toContain("follows a complete value");
    expect(said('{% if subscriber.name == "Bob", %}x{% endif %}')).toContain('"," on line 1 follows a complete value');
    expect(said('{% case subscriber.name %}{% when "x" "Ann" %}M{% endcase %}')).toContain('"\"Ann\"" on line 1 follows a complete value');
    expect(said('{% case subscriber.name %}{% when "Bob" and %}M{% endcase %}')).toContain('"and" on line 1 follows');
    // Lines of a {% liquid %} tag are tags as any.
    expect(said("{% liquid\n  assign x = subscriber.name, 'b'\n  echo x\n%}")).toContain(`", 'b'" on line 2 follows a complete value`);
    expect(said("{% liquid\n  if subscriber.name, subscriber.email == 'x'\n    echo 'y'\n  endif\n%}")).toContain("on line 2 follows a complete value");
    // What a comment block holds is not read, in a {% liquid %} tag too; a comment ends at its first endcomment.
    accepted({ text: "{% comment %}{{ a, b }} {% if x y %}{% endcomment %}ok" });
    accepted({ text: "{% liquid\n comment\n echo this line is a note, not code\n endcomment\n echo 'hi'\n%}" });
    expect(said("{% comment %}write {% comment %} to hide{% endcomment %}{% if subscriber.name, subscriber.email == 'x' %}A{% endif %}")).toContain("follows a complete value");
    // A comment may end in anything.
    for (const text of ["{% # layout: a | b | %}x", "{%- # a | -%}x", "{% liquid\n  # choose: name | email |\n  echo subscriber.name\n%}"]) {
      accepted({ text }, text);
    }
    expect(rejection({ html: "<p>{% if subscriber.tags contains 'vip' and %}VIP{% endif %}</p>" }).param).toBe("html");
    // The same shapes written whole are fine.
    accepted({
      text:
        "{% if subscriber.email and subscriber.name %}a{% endif %}{% if subscriber.name == 'x' or subscriber.tags contains 'vip' %}b{% endif %}" +
        "{% unless subscriber.name != blank %}c{% endunless %}{% case subscriber.source %}{% when 'a', 'b' %}d{% when 'c' or 'e' %}e{% endcase %}" +
        "{{ subscriber.name | default: 'x' | upcase }}{% if subscriber.tags.size > 2 %}f{% elsif subscriber.tags.size >= 1 %}g{% endif %}{{ 'a|' }}" +
        "{{- subscriber.name | append: ', ' | append: \"|\" -}}{%- if subscriber.name -%}x{%- endif -%}{% assign n = subscriber.tags | join: ', ' %}{% echo n | upcase %}{% echo %}" +
        "{% case subscriber.name %}{% when 'a' or 'b', 'c' %}w{% endcase %}{% for t in (1..3) reversed limit: 2 %}{% cycle 'a', 'b' %}{% endfor %}{% liquid\n echo subscriber.name\n %}{% if not subscriber.name %}h{% endif %}",
    });
  });

  it("says what a stray or unknown tag is, and what a single = is, in words a template's author can act on", () => {
    expect(said("hi {% endif %}")).toBe("text: {% endif %} closes no open {% if %} (a stray end tag, or one that does not match the block it ends) on line 1");
    expect(said("{% if subscriber.name %}x{% endfor %}")).toContain("{% endfor %} closes no open {% for %}");
    expect(said("{% elsif subscriber.name %}")).toBe("text: {% elsif %} stands outside an {% if %} on line 1");
    expect(said("{% when 'a' %}")).toBe("text: {% when %} stands outside a {% case %} on line 1");
    expect(said("{% else %}")).toBe("text: {% else %} stands outside an {% if %}, {% unless %}, {% case %} or {% for %} on line 1");
    expect(said("{% shout %}")).toBe('text: unknown tag "shout" on line 1');
    expect(said("{% if subscriber.email = 'x' %}y{% endif %}")).toBe(
      'text: something follows a value that is neither an operator nor a "|" and a filter (to compare, write == or !=; = only assigns, in {% assign %}) on line 1',
    );
    expect(said("{% end %}")).toBe('text: unknown tag "end" on line 1');
    expect(said("{% endless %}")).toBe('text: unknown tag "endless" on line 1');
    // The subject cannot use itself, and its list of known variables does not offer it.
    const own = rejection({ subject: "{{ campaign.subject }}" }).message;
    expect(own).toContain("(the subject cannot use itself); known: subscriber.email");
    expect(own).not.toMatch(/known: .*campaign\.subject/);
  });

  it("names an unknown filter", () => {
    expect(rejection({ html: "<p>\n{{ subscriber.name | shout }}</p>" })).toEqual({ param: "html", message: "html: undefined filter: shout on line 2" });
    // raw would bypass the escaping: it is no filter in html.
    expect(rejection({ html: "{{ subscriber.name | raw }}" }).message).toContain("undefined filter: raw");
  });

  it("refuses the filters that evaluate an expression hidden in a string (*_exp): the check could not see what they read, nor count their work", () => {
    for (const field of ["subject", "preheader", "html", "text"] as const) {
      for (const [filter, plain] of [
        ["where_exp", "where"],
        ["reject_exp", "reject"],
        ["group_by_exp", "group_by"],
        ["find_exp", "find"],
        ["find_index_exp", "find_index"],
        ["has_exp", "has"],
      ]) {
        // Hidden in the string: a misspelt variable, a name made of another's value, the whole subscriber.
        const source = `x\n{{ subscriber.tags | ${filter}: "t", "subscriber.nmae == [k] or subscriber" | size }}`;
        expect(rejection({ [field]: source })).toEqual({
          param: field,
          message: `${field}: the ${filter} filter is not supported: it evaluates an expression hidden in a string (use ${plain} with a property, or a for loop with an if) on line 2`,
        });
      }
    }
    // The same in sight is fine.
    accepted({ text: '{{ subscriber.tags | where: "size", 3 | size }} {% for t in subscriber.tags %}{% if t == "vip" %}VIP{% endif %}{% endfor %}' });
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
    accepted({ html: `<p>${"{{ subscriber.name }}".repeat(2_000)}</p>` });
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

  it("refuses an index nested in indexes more than 16 deep before the engine walks it, and bounds every report", () => {
    const refusal = (over: Parameters<typeof content>[0]) => {
      try {
        validateCampaignContent(content(over));
      } catch (err) {
        expect(err).toBeInstanceOf(ApiError);
        return err as ApiError;
      }
      throw new Error("expected the content to be rejected");
    };
    const nested = (depth: number) => `{{ ${"subscriber.tags[".repeat(depth)}0${"]".repeat(depth)} }}`;
    // 5,000 deep once ran the engine's analysis out of stack (a 500); 1,000 deep answered 8.8 MB.
    for (const depth of [17, 1_000, 5_000]) {
      for (const field of ["text", "html"] as const) {
        const e = refusal({ [field]: `<p>\n${nested(depth)}</p>` });
        expect(e.param).toBe(field);
        expect(e.message).toBe(`${field}: the template nests too deeply (more than 16 "[" inside one another) on line 2`);
      }
    }
    // However the engine reads quotes: an apostrophe in a comment line of {% liquid %} opens no string,
    // and "}}" in a string does not end the output.
    const hidden = [
      `{% liquid\n# it's\necho ${nested(3_000).slice(3, -3)}\n%}`,
      `{{ "}}" | append: ${nested(3_000).slice(3, -3)} }}`,
      `{% raw %}{{ [x] }}{% endraw %}{% if true %}{{ "'" }}${nested(3_000)}{% endif %}`,
    ];
    for (const html of hidden) expect(refusal({ html }).message).toMatch(/^html: the template nests too deeply \(more than 16 "\[" inside one another\) on line 1$/);
    // Brackets in a string count too (no quote hides one), 16 of them are fine.
    accepted({ text: `{{ "${"[".repeat(16)}" | append: subscriber.name }}` });
    // 16 deep is refused for what it reads (an index from a variable), in a report of bounded size.
    const sixteen = refusal({ text: nested(16) });
    expect(sixteen.message).toContain("unknown variable");
    expect(JSON.stringify(sixteen.details).length).toBeLessThan(20_000);
    // A long name is quoted clipped; many problems are counted past the first 20.
    const long = refusal({ text: `{{ subscriber.${"a".repeat(5_000)} }}` });
    expect(long.message.length).toBeLessThan(600);
    expect(long.message).toContain("aaa…");
    const many = refusal({ text: Array.from({ length: 500 }, (_, i) => `{{ subscriber.x${i} }}`).join("\n") });
    expect(many.details).toHaveLength(21);
    expect(many.details?.[0]?.message).toContain('unknown variable "subscriber.x0" on line 1');
    expect(many.details?.[20]?.message).toBe("and 480 more problems of the same kinds (the first 20 are listed)");
    // The engine's own messages quote the tag they are about: up to 300 characters of it.
    const unclosed = refusal({ html: `{% if ${'"'.repeat(200_000)} %}`, text: `{{ 1 | ${"a".repeat(100_000)} }}` });
    expect(JSON.stringify(unclosed.details).length).toBeLessThan(2_000);
    expect(unclosed.message).toContain("…");
    for (const text of [`{{ 1${"a".repeat(5_000)} }}`, `{{ [k${"a".repeat(5_000)}].x }}`, `{% for i in (1..2) %}{{ forloop.x${"a".repeat(5_000)} }}{% endfor %}`]) {
      expect(refusal({ text }).message.length, text.slice(0, 20)).toBeLessThan(600);
    }
  });

  it("html nesting its elements too deeply for its text part to be read is a problem of the html, whether the text comes from the template or each message", () => {
    const tags = "<b>".repeat(5_000);
    for (const html of [
      `${tags}x`,
      // Text read from each message's rendered html (an ordered list's items repeated by a loop).
      `<ol>{% for i in (1..3) %}<li>{{ i }}</li>{% endfor %}</ol>${tags}x`,
    ]) {
      const problem = rejection({ html });
      expect(problem.param).toBe("html");
      expect(problem.message).toContain("nests its elements too deeply");
    }
    // With a text of its own, nothing is read from the html.
    expect(render({ html: `${tags}x`, text: "Plain" }).text).toContain("Plain");
  });

  it("refuses html holding more elements than its text part can be read from in good time (10,000), as the html's problem", () => {
    // A 64 KB template whose loop printed 1.2 MB of paragraphs took 0.7 s a message to read.
    const paragraphs = "<p>x</p>".repeat(8_000);
    for (const html of [
      // Read from each message's html: refused on save, for the sample.
      `{% for i in (1..19) %}${paragraphs}{% endfor %}<p>{{- subscriber.name }}</p>`,
      `<ul>{% for i in (1..2) %}${"<li>x</li>".repeat(5_001)}{% endfor %}</ul><p>{{- subscriber.name }}</p>`,
    ]) {
      const problem = rejection({ html });
      expect(problem.param).toBe("html");
      expect(problem.message).toContain("the html holds more than 10000 elements, too many to read a text part from it");
    }
    // A text read once from the template (no value of a message changes its markup) reads the
    // template, not each message: its loop is the text's own.
    const once = render({ html: `<ul>{% for i in (1..2) %}${"<li>x</li>".repeat(5_001)}{% endfor %}</ul><p>{{ subscriber.name }}</p>` }, bob).text;
    expect(once.match(/\* x/g)).toHaveLength(10_002);
    // 10,000 are read; with a text of its own, nothing is read from the html however much it holds.
    expect(render({ html: `<p>{{ subscriber.name }}</p>${"<p>x</p>".repeat(9_999)}` }, bob).text).toContain(bob.name);
    expect(render({ html: `{% for i in (1..19) %}${paragraphs}{% endfor %}`, text: "Plain" }).text).toContain("Plain");
  });

  it("refuses html nesting deeper than the text part can be read in good time (256 elements), before reading it, as the html's problem", () => {
    // The converter's work grows faster than the depth: 1,500 nested blockquotes (a 156-byte template
    // whose loop writes them) took 5 s a message; 2,000 written out took 14 s to refuse.
    for (const html of [
      `<table>{% tablerow t in subscriber.tags %}{{ t }}{% endtablerow %}</table>{% for j in (1..3) %}{% for i in (1..500) %}<blockquote>x{% endfor %}{% endfor %}`,
      `${"<blockquote>x".repeat(2_000)}`,
      `${"<div><span>".repeat(129)}x`,
      // As the parser reads them: `<div/>` opens a div in html; a paragraph inside an inline element stays open.
      `${"<div/>x".repeat(300)}`,
      `${"<b><p>x".repeat(150)}`,
      // What a scanner of its own misread: a comment the parser ends at once, an attribute holding "/>".
      `<!-->${"<blockquote>x".repeat(1_500)}`,
      `${'<blockquote title="/>">x'.repeat(1_500)}`,
      `<ol>{% for i in (1..2) %}<li>{{ i }}</li>{% endfor %}</ol>${"<blockquote/>x".repeat(1_500)}`,
    ]) {
      const problem = rejection({ html });
      expect(problem.param, html.slice(0, 40)).toBe("html");
      expect(problem.message).toContain("nests its elements too deeply");
    }
    // What the parser closes by itself, or what is not markup, nests nothing: paragraphs and list items
    // left open, cells, void elements, a script's or a style's text, comments.
    const flat = [
      "<p>one".repeat(2_000),
      "<ul>" + "<li>item".repeat(2_000) + "</ul>",
      "<table>" + "<tr><td>cell".repeat(1_000) + "</table>",
      "<br><img src=x><hr>".repeat(1_000),
      `<style>${"a<b ".repeat(1_000)}</style>`,
      `<!-- ${"<div>".repeat(1_000)} -->`,
      `${"<div>".repeat(250)}deep enough${"</div>".repeat(250)}`,
    ];
    for (const html of flat) accepted({ html }, html.slice(0, 40));
  });

  it("names openers never closed by counting them first: thousands of them would each search the rest of the template", () => {
    for (const [open, close] of [["{{", "}}"], ["{%", "%}"]]) {
      const problem = rejection({ html: `<p>Hi</p>\n<p>{{ subscriber.name }}</p>\n${`${open} `.repeat(100_000)}` });
      expect(problem.param).toBe("html");
      expect(problem.message).toBe(`html: more than 20 "${open}" are never closed (no "${close}" after them), the first on line 3`);
    }
    // A few are what Liquid allows: in a raw block, or in a string an output prints.
    expect(render({ html: '<p>{% raw %}{{ and {{{% endraw %} {{ "{%" }}</p>' }).html).toContain("<p>{{ and {{ {%</p>");
  });

  it("rejects a loop over a huge range, taken or not, and bounds loops it cannot see", () => {
    expect(rejection({ text: "{% if false %}\n{% for i in (1..100000000) %}x{% endfor %}{% endif %}" }).message).toContain(
      "a loop may cover at most 1000 items (range (1..100000000)) on line 2",
    );
    const nested = "{% for i in (1..1000) %}{% for j in (1..1000) %}{% endfor %}{% endfor %}";
    // A million passes: whichever bound it meets first (the ranges' allocation, or the empty body's passes).
    expect(rejection({ text: nested }).message).toMatch(/a loop over too large a range|takes more than 20000 steps to render/);
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
    accepted({ text: "{% for i in (1..1000) %}{% if i > 5 %}{{ i }}{% endif %}{% endfor %}" });
  });

  it("a loop with an empty body still costs its passes; the lines of a {% liquid %} tag count as tags", () => {
    // 400 passes over 100,000 items doing nothing took 18 s to save.
    const idle = "{% assign a = (1..100000) %}{% for k in (1..400) %}{% for i in a %}{% endfor %}{% endfor %}Hi";
    expect(rejection({ subject: idle }).message).toContain("takes more than 20000 steps to render");
    // 70,000 lines in one {% liquid %} tag were parsed (quadratically: 18 s) as if they were one tag.
    const lines = `{% liquid\nif false\n${"echo 1\n".repeat(10_001)}endif\n%}`;
    expect(rejection({ html: lines }).message).toBe("html: the template holds more than 10000 Liquid tags and outputs");
    expect(rejection({ text: lines.replaceAll("\n", "\r\n") }).message).toBe("text: the template holds more than 10000 Liquid tags and outputs");
    accepted({ text: `{% liquid\nassign n = subscriber.name\n${"echo n\n".repeat(50)}%}` });
  });

  it("counts the work filters and operators do on their operands: scanning a large array again and again stops as a busy loop does", () => {
    // Each of these walks a 100,000-item array per use without allocating: 22 to 28 s of CPU to save before they were counted.
    const big = "{% assign a = (1..100000) %}";
    for (const [field, busy] of [
      ["text", `${big}${'{{ a | has: "x", 1 }}'.repeat(100)}`],
      ["html", `${big}${"{% if a contains 0 %}x{% endif %}".repeat(1000)}`],
      ["text", `${big}${"{% if a == a %}{% endif %}".repeat(1000)}`],
      ["subject", `${big}{{ a | sum }}{{ a | sum }}`],
    ] as const) {
      const e = rejection({ [field]: busy });
      expect(e.param, busy.slice(0, 60)).toBe(field);
      expect(e.message).toContain("takes more than 20000 steps to render");
    }
    // Ordinary uses, on a subscriber's tags or a modest range, are far from it.
    accepted({
      html: '{% assign r = (1..1000) %}{{ r | sum }} {{ r | join: "," | size }}{% if subscriber.tags contains "vip" %}VIP{% endif %}{{ subscriber.tags | sort | join: ", " }}',
    });
  });

  it("accepts offset:continue (Liquid's own word, not a variable) and a slice asked for more than there is", () => {
    const text = '{% for t in subscriber.tags limit:1 %}[{{ t }}]{% endfor %}{% for t in subscriber.tags offset:continue %}<{{ t }}>{% endfor %} {{ "abc" | slice: 1, 300000 }}';
    accepted({ text });
    expect(render({ text }).text).toMatch(/^\[[^\]]+\](<[^>]+>)* bc/);
    // Anywhere else, continue is a variable like any other, and unknown.
    expect(rejection({ text: "{{ continue }}" }).message).toContain('unknown variable "continue"');
  });

  it("accepts templates that use every variable and filter as documented", () => {
    accepted({
      subject: "{{ subscriber.name | default: 'Hi' }}",
      preheader: "{{ newsletter.name }}",
      html: "{% for tag in subscriber.tags %}{{ tag | capitalize }}{{ forloop.index }}{% endfor %}{{ subscriber.tags.size }}{% assign n = subscriber.name | upcase %}{{ n }}{% capture c %}{{ subscriber.location }}{% endcapture %}{{ c }}{{ subscriber.source | escape }}",
      text: "{{ campaign.subject }} {{ unsubscribe_url }}",
    });
  });

  it("has the limits the contract states", () => {
    expect(CONTENT_LIMITS).toEqual({ html: 524288, text: 262144 });
  });
});
