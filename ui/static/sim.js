// sim.js: the Simulator view. Tiers (compact syntax or a table) or a gcra
// bucket, traffic (constant, bursts, several domains, a pasted trace), run
// through POST /v1/simulate?trace=true and plotted: requests granted and
// rejected over time, the current tier, each tier's window fill (a gcra
// bucket's level). The whole state is in the URL, so a link restores it.
"use strict";
(() => {
  const { el, fmt, api } = obol;
  const $ = (id) => document.getElementById(id);
  const MAX_REQUESTS = 100000; // /v1/simulate's bound

  // The presets are named after Charon's simulator page; their values are
  // obol's own (see docs/dashboard.md).
  const PRESETS = {
    simple: { name: "demo/simple", kind: "tiers", tiers: "10,1,1,0", mode: "constant", rate: "12", duration: "30" },
    penalties: { name: "demo/penalties", kind: "tiers", tiers: "10,1,1,0,40,10,10,50", mode: "bursts", rate: "5", duration: "90", bsize: "60", bevery: "20" },
    punishment: { name: "demo/punishment", kind: "tiers", tiers: "10,1,1,0,1,30,30,0", mode: "constant", rate: "15", duration: "60" },
    batch: { name: "demo/batch", kind: "tiers", tiers: "2,1,1,0,500,60,60,240", mode: "bursts", rate: "1", duration: "300", bsize: "300", bevery: "120" },
    gcra: { name: "demo/export", kind: "gcra", burst: "20", count: "20", period: "1s", mode: "bursts", rate: "10", duration: "30", bsize: "40", bevery: "10" },
  };
  // FIELDS maps URL parameters to inputs.
  const FIELDS = { name: "sim-name", kind: "sim-kind", tiers: "sim-tiers", hard: "sim-hard", burst: "sim-burst", count: "sim-count", period: "sim-period",
    mode: "sim-mode", rate: "sim-rate", duration: "sim-duration", bsize: "sim-burst-size", bevery: "sim-burst-every", domains: "sim-domains", trace: "sim-trace" };
  const DEFAULTS = {};

  function toURL() {
    const q = new URLSearchParams();
    const kind = $("sim-kind").value, mode = $("sim-mode").value;
    for (const [k, id] of Object.entries(FIELDS)) {
      const v = $(id).value;
      if (v === "" || (kind === "tiers" && ["burst", "count", "period"].includes(k)) || (kind === "gcra" && ["tiers", "hard"].includes(k))) continue;
      if ((k === "bsize" || k === "bevery") && mode !== "bursts") continue;
      if (k === "domains" && mode !== "domains") continue;
      if (k === "trace" && mode !== "trace") continue;
      if (k === "rate" && mode === "trace") continue;
      q.set(k, v);
    }
    history.replaceState(null, "", "?" + q.toString() + "#sim");
  }
  function fromURL() {
    const q = new URLSearchParams(location.search);
    for (const [k, id] of Object.entries(FIELDS)) $(id).value = q.has(k) ? q.get(k) : DEFAULTS[k];
    return q.has("tiers") || q.has("burst");
  }
  function applyPreset(p) {
    for (const [k, id] of Object.entries(FIELDS)) $(id).value = p[k] !== undefined ? p[k] : DEFAULTS[k];
    syncKind(); tableFromTiers(); syncMode();
  }

  // The tier table mirrors the compact string both ways.
  function tableFromTiers() {
    const tb = document.querySelector("#tier-table tbody");
    const nums = $("sim-tiers").value.split(",").map((s) => s.trim()).filter((s) => s !== "");
    const rows = [];
    for (let i = 0; i + 3 < nums.length; i += 4) {
      const tr = el("tr", {}, el("td", { text: i / 4 + 1 }));
      ["limit", "window", "active", "cooldown"].forEach((f, j) => tr.append(el("td", {}, el("input", { type: "number", min: 0, step: "any", value: nums[i + j], "aria-label": `tier ${i / 4 + 1} ${f}` }))));
      const rm = el("button", { type: "button", "aria-label": `remove tier ${i / 4 + 1}`, text: "×" });
      rm.addEventListener("click", () => { tr.remove(); tiersFromTable(); tableFromTiers(); });
      tr.append(el("td", {}, rm));
      rows.push(tr);
    }
    tb.replaceChildren(...rows);
  }
  function tiersFromTable() {
    const vals = [...document.querySelectorAll("#tier-table tbody tr")].map((tr) => [...tr.querySelectorAll("input")].map((i) => i.value || "0").join(","));
    $("sim-tiers").value = vals.join(",");
  }
  function syncKind() {
    const g = $("sim-kind").value === "gcra";
    $("sim-tiers-box").hidden = g;
    $("sim-gcra-box").hidden = !g;
  }
  function syncMode() {
    const m = $("sim-mode").value;
    for (const e of document.querySelectorAll(".m-bursts")) e.hidden = m !== "bursts";
    for (const e of document.querySelectorAll(".m-domains")) e.hidden = m !== "domains";
    for (const e of document.querySelectorAll(".m-trace")) e.hidden = m !== "trace";
    $("sim-rate").parentElement.hidden = m === "trace";
  }

  // resource is the config the form describes, as /v1/simulate takes it.
  function resource() {
    if ($("sim-kind").value === "gcra") return { kind: "gcra", burst: +$("sim-burst").value, count: +$("sim-count").value, period: $("sim-period").value.trim() };
    const r = { kind: "tiers", tiers: $("sim-tiers").value.trim() };
    if ($("sim-hard").value !== "") r.hard_limit = +$("sim-hard").value;
    return r;
  }

  // requests generates the traffic the form describes.
  function requests() {
    const mode = $("sim-mode").value, rate = +$("sim-rate").value, dur = +$("sim-duration").value * 1000;
    const out = [];
    const steady = (domain, offset) => {
      if (!(rate > 0)) return;
      for (let t = offset; t < dur; t += 1000 / rate) out.push({ at_ms: Math.round(t), domain });
    };
    if (mode === "trace") {
      $("sim-trace").value.split("\n").forEach((line, i) => {
        line = line.trim();
        if (!line || line[0] === "#") return;
        const f = line.split(/[\s,]+/);
        const at = Number(f[0]), copies = f[2] === undefined ? 1 : Number(f[2]);
        if (!Number.isInteger(at) || at < 0 || !f[1] || !Number.isInteger(copies) || copies < 0) throw new Error(`trace line ${i + 1}: expected "at_ms domain [copies]", got "${line}"`);
        const r = { at_ms: at, domain: f[1] };
        if (copies !== 1) r.copies = copies;
        out.push(r);
      });
    } else if (mode === "domains") {
      const n = Math.max(1, Math.min(100, +$("sim-domains").value));
      for (let d = 0; d < n; d++) steady(`d${d + 1}`, (d * 1000) / rate / n);
    } else {
      steady("d1", 0);
      if (mode === "bursts") {
        const size = +$("sim-burst-size").value, every = +$("sim-burst-every").value * 1000;
        if (size > 0 && every > 0) for (let t = every / 2; t < dur; t += every) for (let k = 0; k < size; k++) out.push({ at_ms: Math.round(t), domain: "d1" });
      }
    }
    out.sort((a, b) => a.at_ms - b.at_ms);
    if (out.length > MAX_REQUESTS) throw new Error(`${fmt(out.length)} requests: the simulator takes at most ${fmt(MAX_REQUESTS)}; lower the rate or the duration`);
    if (!out.length) throw new Error("no requests: give a rate above 0 or a trace");
    return out;
  }

  const sim = { lastRequest: null, lastReply: null };
  window.obolSim = sim;

  let runs = 0; // the latest run's number: an earlier run's reply is dropped

  async function run() {
    const n = ++runs;
    toURL();
    $("sim-yaml").hidden = true;
    let body;
    try { body = { resource: resource(), requests: requests() }; }
    catch (e) { $("sim-summary").replaceChildren(el("p", { class: "error", text: e.message })); return; }
    sim.lastRequest = body;
    sim.lastReply = null;
    $("sim-summary").replaceChildren(el("p", { class: "hint", text: `simulating ${fmt(body.requests.length)} requests…` }));
    let reply;
    for (let attempt = 0; ; attempt++) {
      try { reply = await api("/v1/simulate?trace=true", body); break; }
      catch (e) {
        // One simulation runs at a time per agent: wait for the one running.
        if (e.status === 429 && attempt < 5 && n === runs) { await new Promise((r) => setTimeout(r, 1000)); continue; }
        if (n === runs) { $("sim-summary").replaceChildren(el("p", { class: "error", text: `${e.code}: ${e.message}` })); $("sim-plots").replaceChildren(); }
        return;
      }
    }
    if (n !== runs) return;
    sim.lastReply = reply;
    plot(body, reply);
  }

  function plot(body, reply) {
    const reqs = body.requests, ds = reply.decisions, tr = reply.trace || [];
    const durS = Math.max(+$("sim-duration").value || 0, (reqs[reqs.length - 1].at_ms + 1) / 1000);
    const bin = Math.max(1, Math.ceil(durS / 120));
    const nb = Math.ceil(durS / bin);
    const granted = new Array(nb).fill(0), rejected = new Array(nb).fill(0);
    let g = 0, r = 0, firstRej = null;
    ds.forEach((d, i) => {
      const b = Math.min(nb - 1, Math.floor(reqs[i].at_ms / 1000 / bin));
      if (d.error) return;
      if (d.granted > 0) { granted[b] += 1; g++; } else { rejected[b] += 1; r++; if (firstRej === null) firstRej = reqs[i].at_ms; }
    });
    $("sim-summary").replaceChildren(el("p", {}, `${fmt(g)} granted, ${fmt(r)} rejected of ${fmt(reqs.length)} requests` + (firstRej === null ? "." : `; the first rejection at ${obol.ms(firstRej)}.`)));
    const plots = [];
    const reqChart = charts.chart({ label: "requests granted and rejected over time", xLabel: "time (s)", yLabel: `requests per ${bin} s`, xMax: nb * bin,
      bars: { width: bin, stacks: [{ name: "granted", color: charts.color("granted"), values: granted }, { name: "rejected", color: charts.color("rejected"), values: rejected }],
        attrs: (i) => ({ "data-bin": i, "data-granted": granted[i], "data-rejected": rejected[i] }) } });
    reqChart.id = "plot-requests";
    reqChart.setAttribute("data-bin-s", bin);
    plots.push(el("div", { class: "plot" }, el("h3", { text: "Requests granted and rejected" }),
      charts.legend([{ name: "granted", color: charts.color("granted") }, { name: "rejected", color: charts.color("rejected") }]), reqChart));
    // The plotted domain: the first one's.
    const dom = reqs[0].domain;
    const idx = reqs.map((q, i) => i).filter((i) => reqs[i].domain === dom);
    const tcol = (k) => charts.color("t" + (((k - 1) % 5) + 1));
    if (reply.config.kind === "tiers") {
      const tiers = reply.config.tiers || [];
      const tierPts = idx.filter((i) => !ds[i].error).map((i) => [reqs[i].at_ms / 1000, ds[i].granted > 0 ? ds[i].tier : 0]);
      const c = charts.chart({ label: `current tier of ${dom} over time`, xLabel: "time (s)", yLabel: "tier (0: rejected)", xMax: nb * bin, yMax: Math.max(1, tiers.length), height: 160,
        series: [{ name: "tier", color: charts.color("accent"), points: tierPts, step: true }] });
      c.id = "plot-tier";
      plots.push(el("div", { class: "plot" }, el("h3", { text: `Current tier of ${dom}` }), c));
      const series = tiers.map((t, k) => ({ name: `tier ${k + 1}`, color: tcol(k + 1),
        points: idx.filter((i) => tr[i]).map((i) => [reqs[i].at_ms / 1000, (100 * tr[i].tiers[k].hits) / t.limit]) }));
      const f = charts.chart({ label: `window fill of each tier of ${dom}`, xLabel: "time (s)", yLabel: "% of the tier's limit", xMax: nb * bin, series,
        yMax: Math.max(100, ...series.flatMap((s) => s.points.map((p) => p[1]))) });
      f.id = "plot-fill";
      plots.push(el("div", { class: "plot" }, el("h3", { text: `Window fill of each tier of ${dom}` }), charts.legend(series), f));
    } else {
      const c = reply.config, full = (c.burst * obol.duration(c.period)) / c.count;
      const pts = idx.filter((i) => tr[i]).map((i) => [reqs[i].at_ms / 1000, (100 * Math.max(0, tr[i].tat_ms - reqs[i].at_ms)) / full]);
      const f = charts.chart({ label: `bucket used of ${dom}`, xLabel: "time (s)", yLabel: "% of the burst used", xMax: nb * bin, yMax: 100,
        series: [{ name: "bucket used", color: tcol(1), points: pts }] });
      f.id = "plot-fill";
      plots.push(el("div", { class: "plot" }, el("h3", { text: `GCRA bucket of ${dom}: share of the burst used` }), f));
    }
    $("sim-plots").replaceChildren(...plots);
  }

  // yaml renders the form's resource for the config file.
  function yaml() {
    const name = $("sim-name").value.trim() || "demo/resource", r = resource();
    const lines = ["resources:", `  ${JSON.stringify(name)}:`];
    for (const [k, v] of Object.entries(r)) lines.push(`    ${k}: ${typeof v === "string" ? JSON.stringify(v) : v}`);
    return lines.join("\n") + "\n";
  }

  // The scripts run at the end of the body, before app.js's
  // DOMContentLoaded shows a view: the form is ready, and the URL's state
  // is read before the first run.
  {
    for (const [k, id] of Object.entries(FIELDS)) DEFAULTS[k] = $(id).value;
    for (const b of document.querySelectorAll("[data-preset]")) b.addEventListener("click", () => { applyPreset(PRESETS[b.dataset.preset]); run(); });
    $("sim-kind").addEventListener("change", syncKind);
    $("sim-mode").addEventListener("change", syncMode);
    $("sim-tiers").addEventListener("input", tableFromTiers);
    document.querySelector("#tier-table tbody").addEventListener("input", tiersFromTable);
    $("tier-add").addEventListener("click", () => { const v = $("sim-tiers").value.trim(); $("sim-tiers").value = (v ? v + "," : "") + "10,1,1,0"; tableFromTiers(); });
    $("sim-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
    $("sim-export").addEventListener("click", () => { $("sim-yaml").textContent = yaml(); $("sim-yaml").hidden = false; $("sim-yaml").focus(); toURL(); });
    $("sim-link").addEventListener("click", async () => {
      toURL();
      try { await navigator.clipboard.writeText(location.href); obol.status("link copied"); } catch (_) { obol.status("link: " + location.href); }
    });
    const shared = fromURL();
    syncKind(); syncMode(); tableFromTiers();
    sim.restored = shared;
  }

  let ran = false;
  obol.view("sim", { show() { if (!ran) { ran = true; run(); } } });
})();
