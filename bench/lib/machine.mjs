import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { cpus, loadavg, release, totalmem, type } from "node:os";
import { join } from "node:path";
import { root } from "./wrangler.mjs";

const firstLine = (cmd, args) => {
  const res = spawnSync(cmd, args, { encoding: "utf8" });
  return `${res.stdout ?? ""}${res.stderr ?? ""}`.split("\n").find((line) => line.trim())?.trim() ?? "unknown";
};

/** What the figures were measured on; load average included, since other work may share the machine. */
export const describeMachine = ({ wranglerVersion, wrkVersion }) => {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model ?? "unknown",
    cores: cpu.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${type()} ${release()}`,
    distro: firstLine("sh", ["-c", "grep PRETTY_NAME /etc/os-release | cut -d= -f2 | tr -d '\"'"]),
    node: process.version,
    wrangler: wranglerVersion,
    workerd: firstLine(workerdBinary(), ["--version"]),
    wrk: wrkVersion,
    loadAverageAtStart: loadavg().map((n) => Math.round(n * 100) / 100),
  };
};

/** The workerd wrangler dev runs: wrangler's own copy when it pins one. */
const workerdBinary = () => {
  const nested = join(root, "node_modules", "wrangler", "node_modules", "@cloudflare", "workerd-linux-64", "bin", "workerd");
  return existsSync(nested) ? nested : join(root, "node_modules", ".bin", "workerd");
};
