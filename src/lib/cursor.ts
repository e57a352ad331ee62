import { ApiError } from "../errors/api-error";
import { base64UrlDecode, base64UrlEncode } from "./crypto";
import type { Signer } from "./signing";

// A cursor is the keyset position (the last id of a page), signed together with the list it came
// from (e.g. the subscribers of one workspace). Altered, forged or foreign cursors are rejected.

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PURPOSE = "cursor/v1";
const MAX_CURSOR_LENGTH = 512;

export type CursorCodec = {
  encode: (scope: string, position: string) => Promise<string>;
  /** Returns the position, or throws 400 invalid_cursor. */
  decode: (scope: string, cursor: string) => Promise<string>;
};

export const cursorCodec = (signer: Signer): CursorCodec => ({
  async encode(scope, position) {
    const payload = base64UrlEncode(encoder.encode(position));
    return `${payload}.${await signer.sign(PURPOSE, `${scope}|${payload}`)}`;
  },
  async decode(scope, cursor) {
    const invalid = new ApiError("invalid_cursor", "after is not a cursor issued for this list with these filters (pass the same filters on every page, or read the list again from its start, without after)", { param: "after" });
    // Cursors this service issues are well under this; a longer one is not worth decoding.
    if (cursor.length > MAX_CURSOR_LENGTH) throw invalid;
    const [payload, signature, ...rest] = cursor.split(".");
    if (!payload || !signature || rest.length > 0) throw invalid;
    const position = base64UrlDecode(payload);
    if (!position || !(await signer.verify(PURPOSE, `${scope}|${payload}`, signature))) throw invalid;
    return decoder.decode(position);
  },
});
