// cluster.js: the Cluster view: /v1/peers every 2 s; merge lag, drift
// flushes and gossip bytes from /metrics; per resource the overshoot bound
// drift·limit + rate × lag next to the configured drift.
"use strict";
(() => {
  const { el, fmt, api } = obol;
  let visible = false, timer = null;

  async function peers() {
    try {
      const p = await api("/v1/peers");
      const tb = document.querySelector("#peer-table tbody");
      tb.replaceChildren(...p.peers.map((n) => el("tr", { "data-peer": n.name },
        el("th", { scope: "row", text: n.name + (n.self ? " (this node)" : "") }), el("td", { text: n.address }), el("td", { text: n.state }),
        el("td", { class: "num", text: n.self ? "–" : n.last_sync_age_ms < 0 ? "never" : obol.ms(n.last_sync_age_ms) + " ago" }),
        el("td", { class: "num", text: obol.bytes(n.bytes_in) }), el("td", { class: "num", text: obol.bytes(n.bytes_out) }))));
    } catch (e) { obol.status("/v1/peers: " + e.message, true); }
  }

  // lag returns the mean merge lag (s) over the last poll, else since start.
  function lag(st) {
    const s = (x) => metrics.sum(x, "obol_cluster_merge_lag_seconds_sum"), c = (x) => metrics.sum(x, "obol_cluster_merge_lag_seconds_count");
    const dc = c(st.latest) - c(st.prev);
    if (st.prev && dc > 0) return { v: (s(st.latest) - s(st.prev)) / dc, recent: true };
    const n = c(st.latest);
    return { v: n ? s(st.latest) / n : null, recent: false };
  }

  // limitOf returns a resource's limit and its window (s): the first
  // tier's, or a gcra bucket's burst over its refill time.
  function limitOf(rc) {
    if (rc.kind === "tiers" && rc.tiers && rc.tiers.length) return { limit: rc.tiers[0].limit, window: obol.duration(rc.tiers[0].window) / 1000 };
    if (rc.kind === "gcra") return { limit: rc.burst, window: (rc.burst * obol.duration(rc.period)) / rc.count / 1000 };
    if (rc.kind === "copies" && rc.global_limit !== undefined) return { limit: rc.global_limit, window: 0 };
    return null;
  }

  function render() {
    if (!visible) return;
    const st = metrics.state;
    if (!st.latest) return;
    const l = lag(st);
    const rate = (name, match) => (st.prev && st.dt ? (metrics.sum(st.latest, name, match) - metrics.sum(st.prev, name, match)) / st.dt : 0);
    const stats = [
      ["live nodes", st.latest.some((x) => x.name === "obol_cluster_live_nodes") ? fmt(metrics.sum(st.latest, "obol_cluster_live_nodes")) : "1 (no gossip: alone)"],
      ["merge lag (mean)", l.v === null ? "no packet merged yet" : obol.ms(l.v * 1000) + (l.recent ? "" : " since start")],
      ["packets merged", fmt(rate("obol_cluster_packets_merged_total"), "/s")],
      ["drift flushes", fmt(rate("obol_cluster_drift_flushes_total"), "/s")],
      ["gossip in", obol.bytes(rate("obol_gossip_bytes_total", { direction: "in" })) + "/s"],
      ["gossip out", obol.bytes(rate("obol_gossip_bytes_total", { direction: "out" })) + "/s"],
      ["dropped datagrams", fmt(metrics.sum(st.latest, "obol_gossip_dropped_packets_total"))],
    ];
    document.getElementById("merge-stats").replaceChildren(...stats.map(([k, v]) => el("div", {}, el("dt", { text: k }), el("dd", { text: v }))));
    const cfg = window.obolConfig && window.obolConfig();
    if (!cfg) return;
    const tb = document.querySelector("#overshoot-table tbody");
    const rows = [];
    for (const name of Object.keys(cfg.resources).sort()) {
      const rc = cfg.resources[name], lim = limitOf(rc);
      if (!lim) continue;
      const drift = rc.drift ?? 0.05;
      const granted = (st.rates[name] || {}).granted || 0;
      const bound = drift * lim.limit + granted * (l.v || 0);
      rows.push(el("tr", { "data-resource": name }, el("th", { scope: "row", text: name }),
        el("td", { class: "num", text: lim.window ? `${fmt(lim.limit)} per ${obol.ms(lim.window * 1000)}` : fmt(lim.limit) }),
        el("td", { class: "num", text: `${fmt(drift)} (${fmt(drift * lim.limit)} hits)` }),
        el("td", { class: "num", text: fmt(granted, "/s") }),
        el("td", { class: "num", text: l.v === null ? "–" : obol.ms(l.v * 1000) }),
        el("td", { class: "num", text: `${fmt(bound)} hits (${fmt((100 * bound) / Math.max(1, lim.limit), "%")})` })));
    }
    tb.replaceChildren(...rows);
  }
  metrics.onUpdate(render);

  obol.view("cluster", {
    show() { visible = true; peers(); render(); timer = setInterval(peers, 2000); },
    hide() { visible = false; clearInterval(timer); },
  });
})();
