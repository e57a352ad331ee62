// Types of the Resend stand-in (mock-resend.mjs) for the TypeScript tests that start it.
export type MockResendStats = { requests: number; tooMany: number; errors: number; timeouts: number; replays: number; rejected: number; accepted: number };

export type MockResend = {
  url: string;
  stats: MockResendStats;
  copies: () => { once: number; duplicated: string[] };
  timeline: () => { at: number; answer: number | "timeout"; key: string | undefined }[];
  firstAt: () => number | undefined;
  reset: () => void;
  stop: () => Promise<void>;
};

export declare const startMockResend: (options?: {
  rps?: number;
  errorRate?: number;
  timeoutRate?: number;
  rejectRate?: number;
  seed?: number;
  /** Keep every accepted message whole, for `GET /messages`. */
  keep?: boolean;
  /** The port on 127.0.0.1 (default: a free one). */
  port?: number;
}) => Promise<MockResend>;
