import type { TestProject } from "vitest/node";
import { startLocalWorker } from "./worker";

declare module "vitest" {
  export interface ProvidedContext {
    /** Origin of the local worker the Node-side tests talk to (http://127.0.0.1:<port>). */
    workerOrigin: string;
  }
}

/** One local worker for the whole Node project; each test file reads its origin with inject("workerOrigin"). */
export default async function setup(project: TestProject) {
  const worker = await startLocalWorker();
  project.provide("workerOrigin", worker.origin);
  return () => worker.close();
}
