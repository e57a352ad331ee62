import type { TestProject } from "vitest/node";
import { startMockResend } from "../../../bench/lib/mock-resend.mjs";
import { startLocalWorker } from "./worker";

declare module "vitest" {
  export interface ProvidedContext {
    /** Origin of the local worker the Node-side tests talk to (http://127.0.0.1:<port>). */
    workerOrigin: string;
    /** Origin of the local Resend stand-in the worker sends live mail to; `GET /messages` lists what it accepted. */
    resendOrigin: string;
  }
}

/**
 * One local worker for the whole Node project, sending live mail to a local Resend stand-in (the
 * benchmark's); each test file reads their origins with inject("workerOrigin") and inject("resendOrigin").
 */
export default async function setup(project: TestProject) {
  const resend = await startMockResend({ rps: 100, keep: true });
  const worker = await startLocalWorker({ RESEND_API_KEY: "re_node_tests", RESEND_BASE_URL: resend.url, RESEND_MAX_RPS: "50" });
  project.provide("workerOrigin", worker.origin);
  project.provide("resendOrigin", resend.url);
  return async () => {
    await worker.close();
    await resend.stop();
  };
}
