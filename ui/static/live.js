// live.js: the Live view. A poller reads /metrics every second (the Cluster
// view reads it too), keeps 5 minutes of decision rates per resource and
// outcome, and the view shows them with /v1/config's resources, /v1/top's
// heaviest domains and a domain inspector over /v1/state.
"use strict";
const metrics = (() => {
  const HISTORY = 300; // points: 5 minutes at one a second
  const OUTCOMES = ["granted", "rejected", "shadow", "lenient"];
  const state = { last: null, lastAt: 0, rates: {}, history: {}, latest: null, prev: null, dt: 0, listeners: [] };

  // parse reads the Prometheus text format into [{name, labels, value}].
  function parse(text) {
    const out = [];
    for (const line of text.split("\n")) {
      if (!line || line[0] === "#") continue;
      const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/);
      if (!m) continue;
      const labels = {};
      if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
      out.push({ name: m[1], labels, value: parseFloat(m[4]) });
    }
    return out;
  }
  // sum adds the samples of name whose labels match.
  function sum(samples, name, match) {
    let t = 0;
    for (const s of samples || []) {
      if (s.name !== name) continue;
      if (match && !Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
      t += s.value;
    }
    return t;
  }
  function decisions(samples) {
    const by = {};
    for (const s of samples) {
      if (s.name !== "obol_decisions_total" && !(s.name === "obol_copies_operations_total" && s.labels.op === "reserve")) continue;
      const r = s.labels.resource;
      by[r] = by[r] || {};
      by[r][s.labels.outcome] = (by[r][s.labels.outcome] || 0) + s.value;
    }
    return by;
  }
  async function poll() {
    try {
      const text = await obol.api("/metrics", undefined, true);
      const now = performance.now();
      const samples = parse(text);
      const cur = decisions(samples);
      if (state.last) {
        const dt = (now - state.lastAt) / 1000;
        state.dt = dt;
        for (const [r, c] of Object.entries(cur)) {
          const p = state.last[r] || {};
          const rate = {};
          for (const o of OUTCOMES) rate[o] = Math.max(0, ((c[o] || 0) - (p[o] || 0)) / dt);
          state.rates[r] = rate;
          const h = (state.history[r] = state.history[r] || Object.fromEntries(OUTCOMES.map((o) => [o, []])));
          for (const o of OUTCOMES) { h[o].push(rate[o]); if (h[o].length > HISTORY) h[o].shift(); }
        }
      }
      state.totals = cur;
      state.prev = state.latest;
      state.latest = samples;
      state.last = cur;
      state.lastAt = now;
      for (const f of state.listeners) f();
    } catch (e) {
      obol.status("/metrics: " + e.message, true);
    }
  }
  poll();
  setInterval(poll, 1000);
  return { state, OUTCOMES, sum, onUpdate: (f) => state.listeners.push(f) };
})();

(() => {
  const { el, fmt, api } = obol;
  let config = null, visible = false, topTimer = null, inspectTimer = null;
  const rows = {};

  async function loadConfig() {
    try {
      config = (await api("/v1/config")).config;
      const sel = document.getElementById("inspect-resource");
      const keep = sel.value;
      sel.replaceChildren(...Object.keys(config.resources).sort()
        .filter((r) => config.resources[r].kind !== "pacer")
        .map((r) => el("option", { value: r, text: r })));
      if (keep) sel.value = keep;
    } catch (e) { obol.status("/v1/config: " + e.message, true); }
  }
  window.obolConfig = () => config;

  // pacerText is a pacer's status from /metrics: the wait a call asking
  // now would get, the rate it spaces calls at and the last remaining
  // count it saw (each only when the pacer has it).
  function pacerText(samples, name) {
    const has = (n) => (samples || []).some((s) => s.name === n && s.labels.resource === name);
    if (!has("obol_pacer_wait_seconds")) return "";
    const parts = [`wait ${obol.ms(metrics.sum(samples, "obol_pacer_wait_seconds", { resource: name }) * 1000)}`];
    if (has("obol_pacer_rate_per_second")) parts.push(fmt(metrics.sum(samples, "obol_pacer_rate_per_second", { resource: name }), "/s"));
    if (has("obol_pacer_remaining")) parts.push(`${fmt(metrics.sum(samples, "obol_pacer_remaining", { resource: name }))} left`);
    return parts.join(", ");
  }

  function render() {
    if (!visible || !config) return;
    const body = document.querySelector("#live-table tbody");
    const st = metrics.state;
    for (const name of Object.keys(config.resources).sort()) {
      const kind = config.resources[name].kind;
      if (!rows[name]) {
        const tr = el("tr", { "data-resource": name });
        tr.append(el("th", { scope: "row", text: name }), el("td", { text: kind }), el("td", { class: "spark" }));
        for (const o of metrics.OUTCOMES) tr.append(el("td", { class: "num", "data-outcome": o }));
        tr.append(el("td", { class: "num total" }), el("td", { class: "num extra" }));
        body.append(tr);
        rows[name] = tr;
      }
      const tr = rows[name];
      const h = st.history[name];
      const rate = st.rates[name] || {};
      if (h) tr.querySelector(".spark").replaceChildren(charts.spark(metrics.OUTCOMES.map((o) => ({ values: h[o], color: charts.color(o) })), `${name}: decisions per second, last 5 minutes`));
      for (const o of metrics.OUTCOMES) tr.querySelector(`[data-outcome=${o}]`).textContent = kind === "adaptive" || kind === "pacer" ? "–" : fmt(rate[o] || 0, "/s");
      const tot = (st.totals || {})[name] || {};
      tr.querySelector(".total").textContent = kind === "adaptive" || kind === "pacer" ? "–" : fmt(tot.granted || 0);
      const keys = metrics.sum(st.latest, "obol_tracked_keys", { resource: name });
      const holds = metrics.sum(st.latest, "obol_holds", { resource: name });
      const win = metrics.sum(st.latest, "obol_adaptive_window", { resource: name });
      const out = metrics.sum(st.latest, "obol_adaptive_outstanding", { resource: name });
      tr.querySelector(".extra").textContent = kind === "adaptive" ? `window ${fmt(win)} (${fmt(out)} out)` :
        kind === "copies" ? `${fmt(holds)} copies held` : kind === "pacer" ? pacerText(st.latest, name) : `${fmt(keys)} keys`;
    }
  }
  metrics.onUpdate(render);

  async function loadTop() {
    if (!config) return;
    const cards = [];
    for (const name of Object.keys(config.resources).sort()) {
      const kind = config.resources[name].kind;
      if (kind === "adaptive" || kind === "pacer") continue;
      const card = el("div", { class: "card", "data-resource": name }, el("h3", { text: name }));
      for (const by of ["rejected", "granted"]) {
        try {
          const t = await api(`/v1/top?resource=${encodeURIComponent(name)}&by=${by}&n=5`);
          const ol = el("ol", { "aria-label": `${name}, most ${by}` });
          for (const d of t.domains) ol.append(el("li", { "data-domain": d.domain }, `${d.domain}: ${fmt(d.count)} ${by}` + (d.error_bound ? ` (±${fmt(d.error_bound)})` : "")));
          card.append(el("div", { class: "hint", text: `most ${by} (${fmt(t.total)} in ${obol.ms(t.window_ms)})` }), t.domains.length ? ol : el("p", { class: "hint", text: "none" }));
        } catch (e) { card.append(el("p", { class: "error", text: e.message })); }
      }
      cards.push(card);
    }
    document.getElementById("top-list").replaceChildren(...cards);
  }

  // inspect shows one key's state; countdowns use the tier config.
  async function inspect(resource, domain) {
    const out = document.getElementById("inspect-out");
    let s;
    try { s = await api(`/v1/state?resource=${encodeURIComponent(resource)}&domain=${encodeURIComponent(domain)}`); }
    catch (e) { out.replaceChildren(el("p", { class: "error", text: e.message })); return; }
    const rc = (config && config.resources[resource]) || {};
    const tiersCfg = (rc.domains && rc.domains[domain] && rc.domains[domain].tiers) || rc.tiers || [];
    const now = Date.now();
    const parts = [el("p", {}, `${s.resource} · ${s.domain} · ${s.kind}` + (s.tracked ? "" : " · not tracked (fully reset)"))];
    if (s.tiers) {
      const cur = s.peek && s.peek.tier;
      const t = el("table", { class: "inspect" }, el("thead", {}, el("tr", {}, ...["tier", "state", "hits in window", "fill", "active ends", "cooldown ends"].map((h) => el("th", { scope: "col", text: h })))));
      const tb = el("tbody");
      for (const ti of s.tiers) {
        const c = tiersCfg[ti.tier - 1] || {};
        const act = obol.duration(c.active || 0), cool = obol.duration(c.cooldown || 0);
        let activeEnds = "–", coolEnds = "–";
        if (ti.entered_at_ms) {
          const a = ti.entered_at_ms + act - now, k = ti.entered_at_ms + act + cool - now;
          if (a > 0) activeEnds = "in " + obol.ms(a);
          if (k > 0 && ti.state !== "inactive") coolEnds = "in " + obol.ms(k);
        }
        const pct = ti.limit ? Math.min(100, (100 * ti.hits) / ti.limit) : 100;
        const bar = el("div", { class: "bar" + (ti.hits >= ti.limit ? " over" : ""), role: "meter", "aria-valuemin": 0, "aria-valuemax": ti.limit, "aria-valuenow": ti.hits, "aria-label": `tier ${ti.tier} fill` }, el("span"));
        bar.firstChild.style.width = pct + "%";
        tb.append(el("tr", { "data-tier": ti.tier }, el("td", {}, `${ti.tier}${ti.tier === cur ? " (current)" : ""}`), el("td", { text: ti.state }),
          el("td", { class: "num hits", text: `${fmt(ti.hits)} / ${fmt(ti.limit)}` }), el("td", {}, bar), el("td", { text: activeEnds }), el("td", { text: coolEnds })));
      }
      t.append(tb);
      parts.push(el("div", { class: "scroll" }, t));
    }
    if (s.tat_ms !== undefined) {
      const period = obol.duration(rc.period), full = rc.burst && rc.count ? (rc.burst * period) / rc.count : 0;
      const used = s.tat_ms ? Math.max(0, s.tat_ms - now) : 0;
      const pct = full ? Math.min(100, (100 * used) / full) : 0;
      const bar = el("div", { class: "bar", role: "meter", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(pct), "aria-label": "bucket used" }, el("span"));
      bar.firstChild.style.width = pct + "%";
      parts.push(el("p", {}, `GCRA TAT ${s.tat_ms ? new Date(s.tat_ms).toISOString() : "– (bucket full)"}: ${fmt(pct)} % of the burst used, ${fmt(s.peek ? s.peek.remaining : 0)} left`), bar);
    }
    if (s.holds !== undefined) parts.push(el("p", { text: `holds: ${fmt(s.holds)} copies` }));
    if (s.window !== undefined) parts.push(el("p", { text: `window ${fmt(s.window)}, ${fmt(s.outstanding)} outstanding (bounds ${s.min_window}–${s.max_window}), ${fmt(s.expired)} expired` }));
    if (s.origins && s.origins.length) {
      const label = s.kind === "gcra" ? (i) => ["spent", "refunded"][i] || `#${i}` : (i) => (i === 0 ? "all tiers" : `tier ${i}`);
      const t = el("table", {}, el("thead", {}, el("tr", {}, ...["origin", "hits in window", "share of the cluster", "holds", "last sync"].map((h) => el("th", { scope: "col", text: h })))));
      const tb = el("tbody");
      const total = s.origins.reduce((a, o) => a + ((o.counts || [])[0] || 0), 0);
      for (const o of s.origins) {
        const counts = (o.counts || []).map((c, i) => `${label(i)}: ${fmt(c)}`).join(", ") || "none";
        const share = total ? fmt((100 * ((o.counts || [])[0] || 0)) / total, "%") : "–";
        tb.append(el("tr", {}, el("td", { text: o.origin + (o.self ? " (this node)" : "") + (o.gone ? " (gone)" : "") }),
          el("td", { text: counts }), el("td", { class: "num", text: share }), el("td", { class: "num", text: fmt(o.holds || 0) }), el("td", { text: o.self ? "–" : obol.ms(o.last_sync_age_ms || 0) + " ago" })));
      }
      t.append(tb);
      parts.push(el("h3", { text: "Per origin" }), el("div", { class: "scroll" }, t));
    }
    out.replaceChildren(...parts);
  }

  document.getElementById("inspect-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const r = document.getElementById("inspect-resource").value, d = document.getElementById("inspect-domain").value;
    clearInterval(inspectTimer);
    inspect(r, d);
    inspectTimer = setInterval(() => visible && inspect(r, d), 500);
  });

  obol.view("live", {
    show() {
      visible = true;
      loadConfig().then(() => { render(); loadTop(); });
      topTimer = setInterval(loadTop, 2000);
    },
    hide() { visible = false; clearInterval(topTimer); },
  });
  loadConfig();
})();
