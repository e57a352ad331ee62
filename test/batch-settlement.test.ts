import { describe, expect, it } from "vitest";
import { type BatchMember, type Settlement, settleBatch } from "../src/sending/batch-settlement";
import type { BatchAnswer, EmailOutcome } from "../src/sending/integrations/types";

// The rule every delivery of a provider batch is settled by, as a table: the batch's last request is
// number 3; a member numbered n was in requests 1..n.

const left = { code: "recipient_inactive", message: "left" };
const member = (id: string, askedSeq: number, extra: Partial<BatchMember> = {}): BatchMember => ({ id, askedSeq, inLastRequest: askedSeq === 3, attempts: 0, ...extra });
const members = [
  member("in-last", 3),
  member("out-of-last", 2),
  member("out-sooner", 1),
  member("out-sooner-left", 1, { local: left }),
  member("never", 0),
  member("never-left", 0, { local: left }),
];
const label = (s: Settlement) => (s.kind === "failed" ? `failed ${s.error.code}${s.attempted ? " (attempted)" : ""}` : s.kind);
const kinds = (answer: Exclude<BatchAnswer, { kind: "deferred" }>) => Object.fromEntries(settleBatch(members, answer, 3, 5).map((s, i) => [members[i]?.id, label(s)]));
/** A batch that ended after earlier requests without one known to be taken: anyone ever asked is unknown. */
const endedAfterEarlierRequests = {
  "in-last": "failed outcome_unknown (attempted)",
  "out-of-last": "failed outcome_unknown",
  "out-sooner": "failed outcome_unknown",
  "out-sooner-left": "failed outcome_unknown",
  never: "held",
  "never-left": "failed recipient_inactive",
};
const sent: EmailOutcome = { kind: "sent", providerMessageId: "re_1" };

describe("settling a provider batch", () => {
  it("the last request taken (or its own replay): only its members were mailed; the others were never in a request taken", () => {
    expect(kinds({ kind: "answered", acceptedEarlier: false, outcomes: new Map([["in-last", sent]]) })).toEqual({
      "in-last": "sent",
      "out-of-last": "held",
      "out-sooner": "held",
      "out-sooner-left": "failed recipient_inactive",
      never: "held",
      "never-left": "failed recipient_inactive",
    });
  });

  it("an earlier request taken: in the last two, mailed; left out sooner, unknown (never sent again); never asked, not mailed", () => {
    const outcomes = new Map<string, EmailOutcome>([["in-last", { kind: "sent", providerMessageId: null }]]);
    expect(kinds({ kind: "answered", acceptedEarlier: true, outcomes })).toEqual({
      "in-last": "sent",
      "out-of-last": "sent",
      "out-sooner": "failed outcome_unknown",
      // Its own reason to be left out now says nothing of the requests it was in.
      "out-sooner-left": "failed outcome_unknown",
      never: "held",
      "never-left": "failed recipient_inactive",
    });
  });

  it("a refused first request fails its members with the provider's reason; after earlier requests (answers lost), its members are unknown too", () => {
    const refused = { code: "resend_validation_error", message: "no" };
    const first = [member("in-first", 1, { inLastRequest: true }), member("never", 0), member("never-left", 0, { local: left })];
    expect(settleBatch(first, { kind: "refused", error: refused }, 1, 5).map(label)).toEqual([
      "failed resend_validation_error (attempted)",
      "held",
      "failed recipient_inactive",
    ]);
    expect(kinds({ kind: "refused", error: refused })).toEqual(endedAfterEarlierRequests);
    const [settled] = settleBatch(members, { kind: "refused", error: refused }, 3, 5);
    expect(settled).toMatchObject({ error: { code: "outcome_unknown", message: expect.stringContaining("its last answer: no") } });
  });

  it("a first request refused for one email it names: that one failed, nobody else mailed; after earlier requests, unknown as any refusal", () => {
    const invalid = { code: "resend_validation_error", message: "emails[0].to" };
    const first = [member("named", 1, { inLastRequest: true }), member("other", 1, { inLastRequest: true }), member("never", 0)];
    expect(settleBatch(first, { kind: "rejected", deliveryId: "named", error: invalid }, 1, 5).map(label)).toEqual([
      "failed resend_validation_error (attempted)",
      "held",
      "held",
    ]);
    // An earlier request (its answer lost) may have been taken as it was validated then.
    expect(kinds({ kind: "rejected", deliveryId: "in-last", error: invalid })).toEqual(endedAfterEarlierRequests);
  });

  it("with nobody left to ask, anyone who was in a request is unknown", () => {
    expect(kinds({ kind: "unasked" })).toMatchObject({ "in-last": "failed outcome_unknown", "out-of-last": "failed outcome_unknown", never: "held" });
  });

  it("a batch to be asked again keeps everyone queued, counting an attempt for the last request's members only, until one of them has used the last", () => {
    const error = { code: "resend_http_500", message: "500" };
    const retried = settleBatch(members, { kind: "retry", error }, 3, 5);
    expect(retried.map((s) => (s.kind === "retry" ? s.attempted : s.kind))).toEqual([true, false, false, false, false, false]);
    const exhausted = [member("in-last", 3, { attempts: 4 }), member("out-of-last", 2), member("never", 0)];
    // A request that went unanswered or failed may have been taken: nobody in one is said not mailed.
    expect(settleBatch(exhausted, { kind: "retry", error }, 3, 5).map((s) => (s.kind === "failed" ? s.error.code : s.kind))).toEqual([
      "outcome_unknown",
      "outcome_unknown",
      "held",
    ]);
    // The attempts of members of earlier requests only do not end the batch.
    const early = [member("in-last", 3), member("out-of-last", 2, { attempts: 4 })];
    expect(settleBatch(early, { kind: "retry", error }, 3, 5).map((s) => s.kind)).toEqual(["retry", "retry"]);
  });
});
