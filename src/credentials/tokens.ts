import { randomBase62, sha256Hex } from "../lib/crypto";
import type { CredentialMode } from "../lib/types";

const TOKEN_PATTERN = /^svc_(test|live)_[0-9A-Za-z]{32,128}$/;
const SECRET_LENGTH = 40;

export const issueToken = (mode: CredentialMode): string => `svc_${mode}_${randomBase62(SECRET_LENGTH)}`;

/** The token's mode, or undefined when it is not shaped like one of ours. */
export const tokenMode = (token: string): CredentialMode | undefined =>
  TOKEN_PATTERN.exec(token)?.[1] as CredentialMode | undefined;

export const hashToken = (token: string): Promise<string> => sha256Hex(token);
