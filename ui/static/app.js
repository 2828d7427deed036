// app.js: the page's core: the API client (with the bearer token), the
// views (tabs), number formatting. Every other script registers its view
// with obol.view(name, {show, hide}).
"use strict";
const obol = (() => {
  const TOKEN_KEY = "obol-token";
  const views = {};
  let current = null;

  // status shows a message under the header (errors in red).
  function status(msg, isError) {
    const el = document.getElementById("status");
    el.textContent = msg || "";
    el.className = isError ? "error" : "";
  }

  // ApiError is a reply that is not 2xx: its status, code and message.
  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  // api calls the agent's JSON API: GET when body is undefined, else POST
  // with body as JSON. It sends the token the operator gave, if any, and
  // asks for one on a 401.
  async function api(path, body, text) {
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers["Authorization"] = "Bearer " + token;
    const init = { headers, cache: "no-store" };
    if (body !== undefined) {
      init.method = "POST";
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    if (r.status === 401) {
      document.getElementById("token-form").hidden = false;
      throw new ApiError(401, "unauthorized", "this agent asks for its API token: type it above");
    }
    if (!r.ok) {
      let code = "http_" + r.status, msg = r.statusText;
      try { const e = await r.json(); code = e.error.code; msg = e.error.message; } catch (_) { /* not the API's error body */ }
      throw new ApiError(r.status, code, msg);
    }
    return text ? r.text() : r.json();
  }

  // fmt formats a number with at most 3 significant digits past the point
  // and an optional unit.
  function fmt(v, unit) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    let s;
    const a = Math.abs(v);
    if (a >= 100 || Number.isInteger(v)) s = Math.round(v).toLocaleString("en");
    else if (a >= 10) s = v.toFixed(1);
    else if (a >= 0.01 || a === 0) s = v.toFixed(2);
    else s = v.toExponential(1);
    return unit ? s + "\u202f" + unit : s;
  }
  // bytes formats a byte count as B, KiB, MiB or GiB.
  function bytes(v) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return fmt(i === 0 ? Math.round(v) : v, units[i]);
  }
  // ms formats a duration given in milliseconds.
  function ms(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (Math.abs(v) >= 60000) return fmt(v / 60000, "min");
    if (Math.abs(v) >= 1000) return fmt(v / 1000, "s");
    return fmt(v, "ms");
  }
  // duration parses a Go duration ("1s", "250ms", "1m30s") into ms.
  function duration(s) {
    if (typeof s === "number") return s;
    const units = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 };
    let total = 0, ok = false;
    for (const m of String(s).matchAll(/([0-9.]+)(ns|us|µs|ms|s|m|h)/g)) { total += parseFloat(m[1]) * units[m[2]]; ok = true; }
    return ok ? total : NaN;
  }
  // el makes an element: el("td", {class: "num"}, "text", child...).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = v; else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : String(k));
    return e;
  }

  function view(name, v) { views[name] = v; }

  function select(name) {
    if (!views[name]) name = "live";
    if (current === name) return;
    if (current && views[current].hide) views[current].hide();
    for (const b of document.querySelectorAll("nav [role=tab]")) {
      const on = b.dataset.view === name;
      b.setAttribute("aria-selected", on);
      b.tabIndex = on ? 0 : -1;
      document.getElementById("view-" + b.dataset.view).hidden = !on;
    }
    current = name;
    status("");
    if (views[name].show) views[name].show();
  }

  function viewFromLocation() {
    const h = location.hash.replace("#", "");
    if (h) return h;
    return new URLSearchParams(location.search).has("tiers") || new URLSearchParams(location.search).has("burst") ? "sim" : "live";
  }

  document.addEventListener("DOMContentLoaded", () => {
    const tabs = [...document.querySelectorAll("nav [role=tab]")];
    tabs.forEach((b, i) => {
      b.addEventListener("click", () => { history.replaceState(null, "", location.pathname + location.search + "#" + b.dataset.view); select(b.dataset.view); });
      b.addEventListener("keydown", (e) => { // arrow keys move between tabs
        const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
        if (!d) return;
        const n = tabs[(i + d + tabs.length) % tabs.length];
        n.focus(); n.click();
      });
    });
    document.getElementById("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
      document.getElementById("token").value = "";
      document.getElementById("token-form").hidden = true;
      status("token saved for this tab");
    });
    window.addEventListener("hashchange", () => select(viewFromLocation()));
    select(viewFromLocation());
  });

  return { api, ApiError, status, fmt, bytes, ms, duration, el, view };
})();
