// tuner.js: the Drift tuner view: a cluster of N nodes simulated by the
// agent (POST /v1/simulate/cluster) on virtual time: the worst window over
// the limit, the convergence lag and the bytes each node sends, for
// shipping at the drift threshold and for tick-only shipping. Sweep runs
// the same cluster at a list of drifts (POST /v1/simulate/cluster/sweep),
// plots the figures against drift on a log scale, marks the cheapest drift
// that meets the target overshoot and exports it as the resource's YAML.
"use strict";
(() => {
  const { el, fmt, api } = obol;
  const $ = (id) => document.getElementById(id);
  const tuner = { lastRequest: null, lastReply: null, lastSweepRequest: null, lastSweep: null, lastSweepError: null, cheapest: null };
  window.obolTuner = tuner;

  // serial runs the page's simulations one after another: the agent runs
  // one at a time and answers another sent meanwhile with 429.
  let chain = Promise.resolve();
  function serial(fn) {
    const p = chain.then(fn);
    chain = p.catch(() => {});
    return p;
  }

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
    try { r = await serial(() => api("/v1/simulate/cluster", b)); }
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

  // The sweep's plots: one per figure, against drift.
  const SWEPT = [
    { key: "worst_window_ratio", id: "sweep-worst", label: "worst window ÷ limit", color: "t1", tick: (v) => fmt(v, "×") },
    { key: "false_denials", id: "sweep-denials", label: "false denials", color: "t4", tick: (v) => fmt(v) },
    { key: "bytes_per_node_s", id: "sweep-bytes", label: "bytes per node per second", color: "t2", tick: (v) => obol.bytes(v) },
  ];

  // target is the form's target overshoot as a fraction of the limit
  // (2 % → 0.02), NaN when it is not a number ≥ 0.
  function target() {
    const v = $("t-target").value.trim() === "" ? NaN : +$("t-target").value;
    return v >= 0 ? v / 100 : NaN;
  }

  // cheapestOf is the endpoint's rule (docs/api.md): of the points whose
  // worst window is within 1 + t times the limit, the one that sends the
  // fewest bytes per node, a tie going to the larger drift; null if none.
  function cheapestOf(points, t) {
    let best = null;
    for (const p of points) { // ascending drifts
      if (!(p.worst_window_ratio <= 1 + t + 1e-9)) continue;
      if (!best || p.bytes_per_node_s <= best.bytes_per_node_s) best = p;
    }
    return best;
  }

  // layout places drifts on a log scale (in [0, 1]): drift 0, which a log
  // scale has no place for, in a slot of its own at the left, and the
  // tick-only point in one at the right; ticks at 1, 2 and 5 × 10^k.
  function layout(points) {
    const pos = points.map((p) => p.drift).filter((d) => d > 0);
    let lo = pos.length ? Math.log10(Math.min(...pos)) : -2, hi = pos.length ? Math.log10(Math.max(...pos)) : -2;
    if (hi - lo < 0.6) { const m = (lo + hi) / 2; lo = m - 0.3; hi = m + 0.3; }
    const zero = points.some((p) => p.drift === 0), zeroAt = lo - 0.35;
    const left = (zero ? zeroAt : lo) - 0.1, tickAt = hi + 0.4, right = tickAt + 0.12;
    const at = (l) => (l - left) / (right - left);
    const ticks = [];
    for (let k = Math.floor(lo); k <= Math.ceil(hi); k++) {
      for (const m of [1, 2, 5]) {
        const l = Math.log10(m) + k;
        if (l >= lo - 1e-9 && l <= hi + 1e-9) ticks.push([at(l), String(+(m * 10 ** k).toPrecision(3))]);
      }
    }
    if (zero) ticks.push([at(zeroAt), "0"]);
    ticks.push([at(tickAt), "tick-only"]);
    return { x: (d) => at(d > 0 ? Math.log10(d) : zeroAt), tick: at(tickAt), divider: at((hi + tickAt) / 2), ticks };
  }

  // range4 returns [a, b] holding lo and hi, split into 4 steps of 1, 2 or
  // 5 × 10^k, each at least least.
  function range4(lo, hi, least) {
    let step = charts.niceMax(Math.max(least, (hi - lo) / 4));
    for (;;) {
      const a = Math.floor(lo / step + 1e-9) * step;
      if (a + 4 * step >= hi - 1e-9) return [a, a + 4 * step];
      step = charts.niceMax(step * 1.5);
    }
  }

  async function sweep() {
    const b = body(), t = target(), out = $("sweep-out");
    if (Number.isNaN(t)) {
      out.replaceChildren(el("p", { class: "error", text: "Type a target overshoot: a percentage ≥ 0 (2 = at most 2% over the limit)." }));
      return;
    }
    b.target_overshoot = t;
    Object.assign(tuner, { lastSweepRequest: b, lastSweep: null, lastSweepError: null, cheapest: null });
    $("t-sweep").disabled = true;
    $("t-export").disabled = true;
    $("tuner-yaml").hidden = true;
    out.replaceChildren(el("p", { class: "hint", text: `sweeping ${b.nodes} nodes for ${obol.ms(b.duration_ms)} at each drift…` }));
    let r;
    try { r = await serial(() => api("/v1/simulate/cluster/sweep", b)); }
    catch (e) {
      tuner.lastSweepError = e;
      const old = e.status === 404 && e.code === "not_found";
      out.replaceChildren(el("p", { class: old ? "skip" : "error",
        text: old ? "This agent does not serve POST /v1/simulate/cluster/sweep (an older version): the sweep needs it." : `${e.code}: ${e.message}` }));
      return;
    } finally { $("t-sweep").disabled = false; }
    tuner.lastSweep = r;
    renderSweep();
  }

  // renderSweep draws the last sweep with the form's target: the plots,
  // the cheapest drift and a table of every point.
  function renderSweep() {
    const r = tuner.lastSweep, b = tuner.lastSweepRequest;
    if (!r) return;
    const t = target(), best = Number.isNaN(t) ? null : cheapestOf(r.points, t);
    tuner.cheapest = best;
    $("t-export").disabled = !best;
    $("tuner-yaml").hidden = true;
    const lay = layout(r.points), muted = charts.color("muted");
    const plots = SWEPT.map((f, i) => {
      const vals = r.points.map((p) => p[f.key]).concat([r.tick_only[f.key]]);
      let yMin = 0, yMax;
      const hlines = [];
      if (f.key === "worst_window_ratio") {
        const bounds = Number.isNaN(t) ? [1] : [1, 1 + t];
        [yMin, yMax] = range4(Math.min(...vals, ...bounds), Math.max(...vals, ...bounds), 0.01);
        hlines.push({ y: 1, class: "guide" }); // the limit
        if (!Number.isNaN(t)) hlines.push({ y: 1 + t, text: `target: ${fmt(100 * t)} % over`, class: "target" });
      } else if (f.key === "bytes_per_node_s") {
        const unit = Math.max(...vals) >= 1024 ? 1024 : 1; // steps of whole KiB, or bytes
        yMax = unit * range4(0, Math.max(...vals) / unit, 1)[1];
      } else {
        yMax = range4(0, Math.max(...vals), 1)[1];
      }
      const vlines = [{ x: lay.divider, class: "divider" }];
      if (best) vlines.push({ x: lay.x(best.drift), text: i === 0 ? `cheapest: drift ${best.drift}` : "", class: "cheapest-line" });
      const s = charts.scatter({
        label: `${f.label} against drift`, yLabel: f.label, height: 160, yMin, yMax, yTick: f.tick, xTicks: lay.ticks, hlines, vlines,
        series: [{ name: f.key, color: charts.color(f.color), points: r.points.map((p) => ({
          x: lay.x(p.drift), y: p[f.key], title: `drift ${p.drift}: ${f.tick(p[f.key])}`,
          attrs: { class: p === best ? "pt cheapest" : "pt", "data-drift": p.drift, "data-value": p[f.key],
            "data-cheapest": p === best ? "true" : null, "data-form": p.drift === b.drift ? "true" : null },
        })) }],
        marks: [{ x: lay.tick, y: r.tick_only[f.key], color: muted, title: `tick-only: ${f.tick(r.tick_only[f.key])}`,
          attrs: { class: "pt tick-only", "data-tick-only": "true", "data-value": r.tick_only[f.key] } }],
      });
      s.id = f.id;
      s.setAttribute("data-figure", f.key);
      return el("div", { class: "plot" }, el("h3", { text: `${f.label} against drift (log scale)` }), s);
    });
    const bound = fmt(1 + t, "×");
    let summary;
    if (Number.isNaN(t)) summary = "Type a target overshoot: a percentage ≥ 0.";
    else if (best) {
      summary = `The cheapest drift that keeps the worst window within ${bound} the limit is ${best.drift}: ${obol.bytes(best.bytes_per_node_s)}/s per node, ` +
        `worst window ${fmt(best.worst_window_ratio, "×")}, ${fmt(best.false_denials)} false denials (tick-only shipping: ${fmt(r.tick_only.worst_window_ratio, "×")}, ${obol.bytes(r.tick_only.bytes_per_node_s)}/s).`;
    } else {
      const low = r.points.reduce((a, p) => (!a || p.worst_window_ratio < a.worst_window_ratio ? p : a), null);
      summary = `No drift swept keeps the worst window within ${bound} the limit` + (low ? ` (the lowest is ${fmt(low.worst_window_ratio, "×")}, at drift ${low.drift})` : "") +
        ": try a shorter sync interval or a shorter network delay" + (r.points.some((p) => p.drift === 0) ? "." : ", or a drift of 0 (every hit shipped at once).");
    }
    const tb = el("tbody");
    const num = (v, f) => el("td", { class: "num", text: f(v) });
    const row = (p, name, attrs) => el("tr", attrs, el("th", { scope: "row", text: name }),
      num(p.worst_window_ratio, (v) => fmt(v, "×")), num(p.mean_window_ratio, (v) => fmt(v, "×")), num(p.false_denials, fmt),
      num(p.bytes_per_node_s, (v) => obol.bytes(v) + "/s"), num(p.datagrams_per_node_s, (v) => fmt(v, "/s")), num(p.convergence_p99_ms, obol.ms));
    for (const p of r.points) {
      const notes = [p.drift === b.drift ? "the form's" : "", p === best ? "cheapest" : ""].filter(Boolean).join(", ");
      tb.append(row(p, String(p.drift) + (notes ? ` (${notes})` : ""), { "data-drift": p.drift, class: p === best ? "cheapest" : null }));
    }
    tb.append(row(r.tick_only, "tick-only", { "data-tick-only": "true" }));
    const table = el("table", { id: "sweep-table" }, el("thead", {}, el("tr", {}, ...["drift", "worst ÷ limit", "mean ÷ limit", "false denials", "bytes per node", "datagrams per node", "convergence p99"]
      .map((h, i) => el("th", { scope: "col", class: i ? "num" : null, text: h })))), tb);
    $("sweep-out").replaceChildren(el("p", { id: "sweep-summary", text: summary }),
      charts.legend([{ name: "at each drift (dots)", color: charts.color("t1") }, { name: "tick-only (square)", color: muted },
        { name: "target (dashed)", color: charts.color("rejected") }, { name: "cheapest drift", color: charts.color("granted") }]),
      el("div", { id: "sweep-plots" }, ...plots), el("div", { class: "scroll" }, table));
  }

  // yaml renders the swept resource with the cheapest drift for the config
  // file, as the Simulator's Export YAML does.
  function yaml() {
    const best = tuner.cheapest, b = tuner.lastSweepRequest;
    const name = $("t-name").value.trim() || "api/search";
    const lines = [
      `# drift ${best.drift}: the cheapest swept drift whose worst window stayed within ${+(1 + target()).toPrecision(6)} × the limit,`,
      `# simulated with ${b.nodes} nodes, gossip.sync_interval ${b.sync_interval_ms}ms and ${fmt(b.offered_per_s * b.nodes)} requests/s offered in all`,
      "resources:", `  ${JSON.stringify(name)}:`,
    ];
    for (const [k, v] of Object.entries({ ...b.resource, drift: best.drift })) lines.push(`    ${k}: ${typeof v === "string" ? JSON.stringify(v) : v}`);
    return lines.join("\n") + "\n";
  }

  async function exportYAML() {
    if (!tuner.cheapest) return;
    const y = yaml(), pre = $("tuner-yaml");
    pre.textContent = y;
    pre.hidden = false;
    pre.focus();
    try { await navigator.clipboard.writeText(y); obol.status("YAML copied"); } catch (_) { obol.status("the YAML is shown below the form: copy it from there"); }
  }

  $("tuner-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  $("sweep-form").addEventListener("submit", (e) => { e.preventDefault(); sweep(); });
  $("t-target").addEventListener("input", renderSweep);
  $("t-export").addEventListener("click", exportYAML);
  let ran = false;
  obol.view("tuner", { show() { if (!ran) { ran = true; run(); } } });
})();
