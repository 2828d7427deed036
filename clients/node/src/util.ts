// The checks of arguments and the small helpers the client's calls share.
import { badRequest } from "./errors";
import { abortReason } from "./transport";

export function parseBoolEnv(name: string, v: string): boolean {
  switch (v.toLowerCase()) {
    case "1":
    case "t":
    case "true":
      return true;
    case "0":
    case "f":
    case "false":
      return false;
  }
  throw badRequest(`${name}: must be 1, true, 0 or false, got ${JSON.stringify(v)}`);
}

export function checkInt(name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw badRequest(`${name}: must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

export function checkName(name: string, v: unknown): string {
  if (typeof v !== "string" || v === "") {
    throw badRequest(`${name}: must be a non-empty string, got ${JSON.stringify(v)}`);
  }
  return v;
}

export const MAX_COPIES = 1_000_000_000;

export function counts(o: { copies?: number; minCopies?: number }): [number, number] {
  const copies = o.copies === undefined ? 1 : checkInt("copies", o.copies, 0, MAX_COPIES);
  const min = o.minCopies === undefined ? copies : checkInt("minCopies", o.minCopies, 0, MAX_COPIES);
  if (min > copies) throw badRequest(`minCopies: must be at most copies (${copies}), got ${min}`);
  return [copies, min];
}

export function num(v: unknown, d = 0): number {
  return typeof v === "number" && Number.isFinite(v) ? v : d;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortReason(signal!));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export function canParse(u: string): boolean {
  try {
    new URL(u);
    return true;
  } catch {
    return false;
  }
}
