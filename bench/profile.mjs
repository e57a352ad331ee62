#!/usr/bin/env node
// Profiles the worker under load: connects to wrangler dev's inspector, records a CPU profile while
// wrk drives one URL, and prints the functions with the most self time (by source file).
// Usage: node bench/profile.mjs <inspector-port> <seconds> <url> [header …]
import { spawn } from "node:child_process";

const [port, seconds, url, ...headers] = process.argv.slice(2);
if (!url) {
  console.error("usage: node bench/profile.mjs <inspector-port> <seconds> <url> [header …]");
  process.exit(2);
}
// The inspector proxy only accepts DevTools origins.
const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { origin: "https://devtools.devprod.cloudflare.dev" } });
let nextId = 0;
const pending = new Map();
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  if (message.id !== undefined && pending.has(message.id)) {
    pending.get(message.id)(message);
    pending.delete(message.id);
  }
};
const send = (method, params = {}) =>
  new Promise((resolve) => {
    const id = ++nextId;
    pending.set(id, resolve);
    socket.send(JSON.stringify({ id, method, params }));
  });
await new Promise((resolve, reject) => {
  socket.onopen = resolve;
  socket.onerror = reject;
});
await send("Profiler.enable");
await send("Profiler.setSamplingInterval", { interval: 200 });
await send("Profiler.start");
const wrk = spawn("wrk", ["-t1", "-c8", `-d${seconds}s`, ...headers.flatMap((h) => ["-H", h]), url], { stdio: ["ignore", "pipe", "inherit"] });
let out = "";
wrk.stdout.on("data", (chunk) => (out += chunk));
await new Promise((resolve) => wrk.on("exit", resolve));
const { result } = await send("Profiler.stop");
socket.close();
console.log(out.split("\n").filter((line) => /Requests\/sec|Latency/.test(line)).join("\n"));

const { nodes, samples, timeDeltas } = result.profile;
const byId = new Map(nodes.map((node) => [node.id, node]));
const self = new Map();
let total = 0;
samples.forEach((id, i) => {
  const node = byId.get(id);
  const frame = node.callFrame;
  if (frame.functionName === "(idle)") return;
  const dt = timeDeltas[i] ?? 0;
  total += dt;
  const key = `${frame.functionName || "(anonymous)"} ${frame.url.split("/").slice(-1)[0]}:${frame.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + dt);
});
console.log(`busy ${(total / 1000).toFixed(0)} ms of ${seconds} s`);
for (const [key, us] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
  console.log(`${((us / total) * 100).toFixed(1).padStart(5)}%  ${key}`);
}
