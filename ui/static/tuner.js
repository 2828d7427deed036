// tuner.js: the Drift tuner view: a cluster of N nodes simulated by the
// agent (POST /v1/simulate/cluster) on virtual time: the worst window over
// the limit, the convergence lag and the bytes each node sends, for
// shipping at the drift threshold and for tick-only shipping.
"use strict";
(() => {
  const { el, fmt, api } = obol;
  const $ = (id) => document.getElementById(id);
  const tuner = { lastRequest: null, lastReply: null };
  window.obolTuner = tuner;

  function body() {
    const limit = Math.round(+$("t-limit").value), win = +$("t-window").value;
    const b = {
      resource: { kind: "tiers", tiers: `${limit},${win},${win},0`, drift: +$("t-drift").value },
      nodes: Math.round(+$("t-nodes").value),
      sync_interval_ms: Math.round(+$("t-sync").value),
      drift: +$("t-drift").value,
      delay_ms: Math.round(+$("t-delay").value),
      loss: +$("t-loss").value / 100,
      offered_per_s: 0, // set below: the form asks for the whole cluster's load, the endpoint takes it per node
      duration_ms: Math.round(+$("t-duration").value * 1000),
      seed: 1,
    };
    b.offered_per_s = +$("t-offered").value / Math.max(1, b.nodes);
    b.skew = $("t-skew").value;
    return b;
  }

  const FIGURES = [
    ["worst_window_ratio", "worst window ÷ limit", (v) => fmt(v, "×")],
    ["mean_window_ratio", "mean window ÷ limit", (v) => fmt(v, "×")],
    ["false_denials", "false denials", (v) => fmt(v)],
    ["convergence_p50_ms", "convergence lag p50", (v) => obol.ms(v)],
    ["convergence_p99_ms", "convergence lag p99", (v) => obol.ms(v)],
    ["bytes_per_node_s", "bytes per node", (v) => obol.bytes(v) + "/s"],
  ];

  async function run() {
    const b = body();
    tuner.lastRequest = b;
    const out = $("tuner-out");
    out.replaceChildren(el("p", { class: "hint", text: `simulating ${b.nodes} nodes for ${obol.ms(b.duration_ms)}…` }));
    let r;
    try { r = await api("/v1/simulate/cluster", b); }
    catch (e) {
      tuner.lastError = e;
      out.replaceChildren(el("p", { class: e.status === 404 && e.code === "not_found" ? "skip" : "error",
        text: e.status === 404 && e.code === "not_found" ? "This agent does not serve POST /v1/simulate/cluster (an older version): the drift tuner needs it." : `${e.code}: ${e.message}` }));
      return;
    }
    tuner.lastReply = r;
    const t = el("table", { id: "tuner-table" }, el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "figure" }),
      el("th", { scope: "col", class: "num", text: `drift ${fmt(b.drift)} (flush at the threshold)` }), el("th", { scope: "col", class: "num", text: "tick-only shipping" }))));
    const tb = el("tbody");
    for (const [k, label, f] of FIGURES) {
      const tick = r.tick_only ? r.tick_only[k] : undefined;
      tb.append(el("tr", { "data-figure": k }, el("th", { scope: "row", text: label }), el("td", { class: "num", "data-value": r[k], text: f(r[k]) }),
        el("td", { class: "num", text: tick === undefined ? "–" : f(tick) })));
    }
    t.append(tb);
    const limit = Math.round(+$("t-limit").value);
    out.replaceChildren(el("p", {}, `With ${b.nodes} nodes, a limit of ${fmt(limit)} may be exceeded by up to ${fmt(Math.max(0, (r.worst_window_ratio - 1) * limit))} hits in the worst window.`),
      el("div", { class: "scroll" }, t));
  }

  $("tuner-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  let ran = false;
  obol.view("tuner", { show() { if (!ran) { ran = true; run(); } } });
})();
