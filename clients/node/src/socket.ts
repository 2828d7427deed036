import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/**
 * The agent's default socket, the rule the agent itself follows:
 * `$OBOL_SOCKET`, else `$XDG_RUNTIME_DIR/obol.sock`, else
 * `/run/obol/obol.sock` when `/run/obol` exists, else `/tmp/obol-UID/obol.sock`.
 */
export function defaultSocket(env: Record<string, string | undefined> = process.env): string {
  if (env.OBOL_SOCKET) return env.OBOL_SOCKET;
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, "obol.sock");
  try {
    if (fs.statSync("/run/obol").isDirectory()) return "/run/obol/obol.sock";
  } catch {
    // not there
  }
  const uid = typeof process.getuid === "function" ? process.getuid() : os.userInfo().uid;
  return `/tmp/obol-${uid}/obol.sock`;
}
