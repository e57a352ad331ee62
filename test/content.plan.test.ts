import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type CampaignContent, compileCampaign, MAX_RENDERED, type Recipient, renderMessage } from "../src/content";
import { signerFor } from "../src/lib/signing";
import { composeEmail, composerFor } from "../src/sending/compose";
import type { MessageContext } from "../src/sending/send.repository";

// A part without tags renders from a flat list of steps, each distinct output evaluated once per
// message (src/content/plan.ts); a part with tags through liquidjs's renderer. Every message here is
// rendered both ways and must be the same to the byte.

const newsletter = { name: `Notes & "Quotes" <Weekly>`, address: "1 Main Street\nSpringfield" };
const URL = "https://news.example.com/u/TOKEN?a=1&b=2";

const recipients: Recipient[] = [
  { email: "bob@example.com", name: `<b>Bob</b> & "Al" O'Neil`, tags: ["vip", "beta"], location: "paris", source: "import" },
  { email: "ana@example.com", name: null, tags: [], location: null, source: null },
  { email: "zoë@example.com", name: "  Zoë  ", tags: ["ü"], location: "Zürich", source: "api" },
];

const OUTPUTS = [
  "{{ subscriber.email }}",
  "{{ subscriber.name }}",
  "{{ subscriber.name | default: 'there' }}",
  '{{ subscriber.name | default: "friend" | upcase }}',
  "{{ subscriber.name | downcase | capitalize }}",
  "{{ subscriber.name | strip | truncate: 5 }}",
  "{{ subscriber.name | truncatewords: 1, '…' }}",
  "{{ subscriber.name | append: '!' | prepend: '¡' }}",
  "{{ subscriber.name | replace: 'o', '0' | escape }}",
  "{{ subscriber.name | escape_once }}",
  "{{ subscriber.name | url_encode }}",
  "{{ subscriber.name | size | plus: 1 | times: 2 }}",
  "{{ subscriber.tags }}",
  "{{ subscriber.tags | join: ', ' }}",
  "{{ subscriber.tags.size }} {{ subscriber.tags.first }} {{ subscriber.tags.last }} {{ subscriber.tags[0] }}",
  "{{ subscriber.tags | json }}",
  "{{ subscriber.location | json }} {{ subscriber.tags[5] | json }} {{ subscriber.source | size }}",
  '{{ subscriber["location"] | capitalize }}',
  "{{ subscriber.location | default: 'you' }}",
  "{{ subscriber.source | split: 'p' | join: '-' }}",
  "{{ newsletter.name }}",
  "{{ newsletter.name | slice: 0, 5 }}",
  "{{ unsubscribe_url }}",
  "{{ 'a&b' }} {{ 42 }} {{ nil }} {{ true }} {{ '2024-03-01' | date: '%Y' }}",
  "{{- subscriber.email -}}",
];

const TAGGED = [
  "{% if subscriber.name %}Hi {{ subscriber.name }}{% else %}Hi you{% endif %}",
  "{% for tag in subscriber.tags %}[{{ tag | upcase }}]{% endfor %}",
  "{% assign who = subscriber.name | default: 'reader' %}{{ who }} {{ subscriber.email }}",
  "{% capture line %}{{ subscriber.email }}/{{ newsletter.name }}{% endcapture %}{{ line | upcase }}",
  // Shadows a variable every later part reads: nothing kept from before may be reused after it.
  "{% assign subscriber = newsletter.name %}{{ subscriber }}",
];

const both = (content: CampaignContent) => {
  const withSteps = compileCampaign(content, newsletter);
  const without = compileCampaign(content, newsletter, { steps: false });
  return { withSteps, without };
};

const expectSame = (content: CampaignContent) => {
  const { withSteps, without } = both(content);
  for (const recipient of recipients) {
    expect(renderMessage(withSteps, recipient, URL)).toEqual(renderMessage(without, recipient, URL));
  }
  return withSteps;
};

const content = (over: Partial<CampaignContent>): CampaignContent => ({ subject: "Hello", preheader: null, html: null, text: null, ...over });

describe("rendering by steps gives what liquidjs's renderer gives", () => {
  it.each(OUTPUTS)("an output in every part: %s", (output) => {
    const compiled = expectSame(
      content({
        subject: `S ${output}`,
        preheader: `P ${output}`,
        html: `<html><body><h1>${output}</h1><p><a href="${output}">x</a> ${output}</p></body></html>`,
        text: `T ${output}\n${output}`,
      }),
    );
    // Not vacuous: every part of these took the steps.
    expect([compiled.subject.steps, compiled.preheader?.steps, compiled.html?.steps]).not.toContain(null);
  });

  it("the text derived from the html reuses the html's values, with the footer", () => {
    const outputs = OUTPUTS.filter((output) => !output.includes("unsubscribe_url"));
    const html = `<html><body><h1>${outputs.join("</h1><p>")}</p></body></html>`;
    const compiled = expectSame(content({ subject: "{{ subscriber.name | default: 'x' }}", preheader: "{{ subscriber.location }}", html }));
    expect(compiled.text.kind === "template" && compiled.text.part.steps).not.toBe(null);
    // The footer block, in html and text, for a template that does not place the link itself.
    const m = renderMessage(compiled, recipients[0] as Recipient, URL);
    expect(m.html).toContain(`<a href="https://news.example.com/u/TOKEN?a=1&amp;b=2" style="color:inherit;text-decoration:underline">Unsubscribe</a>`);
    expect(m.html).toContain("Notes &amp; &quot;Quotes&quot; &lt;Weekly&gt;");
    expect(m.text).toContain(`\nUnsubscribe: ${URL}\n1 Main Street\nSpringfield`);
  });

  it.each(TAGGED)("a part with tags, before and after parts without: %s", (tagged) => {
    const compiled = expectSame(
      content({
        subject: "{{ subscriber.name | default: 'x' }} {{ newsletter.name }}",
        preheader: "{{ subscriber.email }} {{ subscriber.name }}",
        html: `<html><body><p>${tagged}</p><p>{{ subscriber.name }} {{ newsletter.name }}</p></body></html>`,
        text: "{{ subscriber.name }} {{ subscriber.email }} {{ newsletter.name }}",
      }),
    );
    expect(compiled.html?.steps).toBeNull();
    expect(compiled.text.kind === "template" && compiled.text.part.steps).not.toBeNull();
  });

  it("a text derived from html with tags, and one whose Liquid does not survive conversion", () => {
    expectSame(content({ html: "<p>{% if subscriber.name %}{{ subscriber.name }}{% endif %}</p><p>{{ subscriber.email }}</p>" }));
    expectSame(content({ html: '<p {% if subscriber.name %}class="n"{% endif %}>Hi</p><p>{{ subscriber.email | upcase }}</p>' }));
  });

  it("fails the same way past a ceiling", () => {
    const long = { ...(recipients[0] as Recipient), name: "x".repeat(MAX_RENDERED.subject) };
    const { withSteps, without } = both(content({ subject: "{{ subscriber.name }}!" }));
    expect(() => renderMessage(withSteps, long, URL)).toThrow(/subject: .*more than 998 characters|more than 998 characters/);
    expect(() => renderMessage(without, long, URL)).toThrow(/more than 998 characters/);
  });

  it("caps text at 1 MiB and html at 2 MiB of output, both ways, whatever the allocation budget", () => {
    const named = { ...(recipients[0] as Recipient), name: "n".repeat(200) };
    // A pass prints 200 characters per output: 1,000 passes of k outputs make k × 200,000 characters.
    const loop = (outputs: number) => `{% for i in (1..1000) %}${"{{ subscriber.name }}".repeat(outputs)}{% endfor %}`;
    const cases = [
      { within: { text: loop(5) }, over: { text: loop(6) }, error: /more than 1048576 characters/ },
      { within: { html: loop(10), text: "Hi" }, over: { html: loop(11), text: "Hi" }, error: /more than 2097152 characters/ },
    ];
    for (const { within, over, error } of cases) {
      for (const compiled of Object.values(both(content(within)))) expect(() => renderMessage(compiled, named, URL)).not.toThrow();
      for (const compiled of Object.values(both(content(over)))) expect(() => renderMessage(compiled, named, URL)).toThrow(error);
    }
  });
});

// Templates drawn at random from the pieces a campaign is made of: text with html's special
// characters, outputs of every variable through chains of filters with drawn literal arguments,
// whitespace control, and now and then a tag; recipients with drawn values. Each message rendered
// both ways must be the same, or fail the same way.
describe("rendering by steps, for drawn templates and recipients", () => {
  const text = fc.stringMatching(/^[a-zA-Z0-9 <>&"'.,!\n-]{0,12}$/);
  const quoted = fc.stringMatching(/^[a-zA-Z0-9 <>&.,!-]{0,6}$/).map((v) => `"${v}"`);
  const number = fc.integer({ min: -3, max: 12 }).map(String);
  const variable = fc.constantFrom(
    "subscriber.email",
    "subscriber.name",
    "subscriber.tags",
    "subscriber.tags.first",
    "subscriber.tags.size",
    "subscriber.tags[1]",
    "subscriber.location",
    'subscriber["source"]',
    "newsletter.name",
    "unsubscribe_url",
    "nil",
    '"x<y"',
    "7",
  );
  const filter = fc.oneof(
    fc.constantFrom("upcase", "downcase", "capitalize", "strip", "escape", "escape_once", "url_encode", "size", "first", "last", "json", "strip_html", "newline_to_br"),
    quoted.map((a) => `default: ${a}`),
    quoted.map((a) => `append: ${a}`),
    quoted.map((a) => `prepend: ${a}`),
    fc.tuple(quoted, quoted).map(([a, b]) => `replace: ${a}, ${b}`),
    number.map((n) => `truncate: ${n}`),
    number.map((n) => `plus: ${n}`),
    fc.tuple(number, number).map(([a, b]) => `slice: ${a}, ${b}`),
    quoted.map((a) => `join: ${a}`),
    quoted.map((a) => `split: ${a}`),
  );
  const output = fc
    .tuple(variable, fc.array(filter, { maxLength: 3 }), fc.boolean(), fc.boolean())
    .map(([v, filters, left, right]) => `{{${left ? "-" : ""} ${[v, ...filters].join(" | ")} ${right ? "-" : ""}}}`);
  const tag = fc.constantFrom(
    "{% if subscriber.name %}named{% endif %}",
    "{% for t in subscriber.tags %}<i>{{ t }}</i>{% endfor %}",
    "{% assign subscriber = newsletter.name %}",
    "{% capture c %}{{ subscriber.email }}{% endcapture %}{{ c | upcase }}",
  );
  const template = (withTags: boolean) =>
    fc.array(withTags ? fc.oneof({ weight: 4, arbitrary: text }, { weight: 4, arbitrary: output }, { weight: 1, arbitrary: tag }) : fc.oneof(text, output), { maxLength: 8 }).map((pieces) => pieces.join(""));
  const value = fc.option(fc.stringMatching(/^[a-zA-Z0-9 <>&"'\n.-]{0,10}$/), { nil: null, freq: 2 });
  const recipient: fc.Arbitrary<Recipient> = fc.record({
    email: fc.constantFrom("a@example.com", "o'neil+x@example.com"),
    name: value,
    tags: fc.array(fc.stringMatching(/^[a-z<&]{1,4}$/), { maxLength: 3 }),
    location: value,
    source: value,
  });
  const campaign: fc.Arbitrary<CampaignContent> = fc.record({
    subject: template(false).map((t) => `S${t}`),
    preheader: fc.option(template(false), { nil: null }),
    html: fc.option(template(true).map((t) => `<html><body><p>${t}</p></body></html>`), { nil: null }),
    text: fc.option(template(true), { nil: null }),
  });

  const outcome = (run: () => unknown) => {
    try {
      return { message: run() };
    } catch (err) {
      return { error: err instanceof Error ? err.message : String(err) };
    }
  };

  it("reports a part that renders too large the same way both ways, with its line", () => {
    const pair = both({ subject: "S", preheader: '{{ unsubscribe_url | replace: "", ",! " | replace: "", " <>0<0" }}', html: null, text: null });
    const person = { email: "a@example.com", name: null, tags: [], location: null, source: null };
    const withSteps = outcome(() => renderMessage(pair.withSteps, person, URL));
    expect(withSteps).toEqual(outcome(() => renderMessage(pair.without, person, URL)));
    expect(withSteps).toEqual({ error: "the template renders to more than 1000 characters on line 1" });
  });

  it("gives the same message or the same error both ways", () => {
    let compared = 0;
    let withSteps = 0;
    fc.assert(
      fc.property(campaign, recipient, (content, person) => {
        const compiled = outcome(() => both(content));
        if ("error" in compiled) return; // a template the service would not save
        const pair = compiled.message as ReturnType<typeof both>;
        expect(outcome(() => renderMessage(pair.withSteps, person, URL))).toEqual(outcome(() => renderMessage(pair.without, person, URL)));
        compared++;
        if (pair.withSteps.html?.steps) withSteps++;
      }),
      { numRuns: 1000 },
    );
    // Not vacuous: most drawn campaigns compile, and many of their html parts take the steps.
    expect(compared).toBeGreaterThan(700);
    expect(withSteps).toBeGreaterThan(100);
  });
});

describe("a campaign is compiled once per isolate for the same content", () => {
  const context: MessageContext = {
    campaignId: "cmp_01JCOMPILEDONCE00000000000",
    subject: "Hi {{ subscriber.name }}",
    preheader: null,
    html: "<html><body><p>{{ subscriber.email }}</p></body></html>",
    text: null,
    newsletterName: "Weekly",
    address: null,
    fromName: null,
    fromEmail: "news@example.com",
    replyTo: null,
  };
  const signer = signerFor({ DB: env.DB, CURSOR_SECRET: "compiled-once-test-secret" });
  const environment = { PUBLIC_BASE_URL: "https://news.example.com" };
  const ana = { id: "sub_01JCOMPILEDONCE00000000000", email: "ana@example.com", name: "Ana", tags: [], location: null, source: null };

  it("reuses the compiled campaign, and compiles again when anything it renders changes", async () => {
    const first = composerFor(context, environment, signer);
    expect(composerFor({ ...context }, environment, signer).compiled).toBe(first.compiled);
    // The newsletter renamed mid-send: the footer must say the new name.
    const renamed = composerFor({ ...context, newsletterName: "Monthly" }, environment, signer);
    expect(renamed.compiled).not.toBe(first.compiled);
    expect((await composeEmail(renamed, ana, "dlv_1")).text).toContain("subscribed to Monthly.");
    for (const change of [{ subject: "Hello" }, { preheader: "Pre" }, { html: "<p>x</p>" }, { text: "t" }, { address: "1 Main St" }]) {
      expect(composerFor({ ...context, ...change }, environment, signer).compiled).not.toBe(renamed.compiled);
    }
    // Another campaign with the same content is compiled on its own.
    expect(composerFor({ ...context, campaignId: "cmp_01JCOMPILEDONCE00000000001" }, environment, signer).compiled).not.toBe(first.compiled);
  });

  it("keeps the last 8 campaigns it used: a long-lived isolate that serves many holds no more", () => {
    const of = (i: number) => ({ ...context, campaignId: `cmp_01JCOMPILEDKEPT${String(i).padStart(11, "0")}` });
    const compiled = Array.from({ length: 9 }, (_, i) => composerFor(of(i), environment, signer).compiled);
    // The eight used last are kept; the first, used least recently, was forgotten.
    for (let i = 8; i >= 1; i--) expect(composerFor(of(i), environment, signer).compiled, `campaign ${i}`).toBe(compiled[i]);
    expect(composerFor(of(0), environment, signer).compiled).not.toBe(compiled[0]);
  });
});

