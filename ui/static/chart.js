// chart.js: plain SVG charts (no library): sparklines, x/y charts with
// axes, lines, steps and stacked bars, and point plots on a scale the
// caller lays out (the drift sweep's log scale). Colours come from CSS
// variables, so the charts follow the light or dark theme.
"use strict";
const charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
    for (const k of kids) e.append(k);
    return e;
  }
  // niceMax rounds v up to 1, 2 or 5 times a power of ten.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }
  // spark draws series ([{values, color}]) as lines over the same scale.
  function spark(series, label) {
    const w = 150, h = 32;
    const max = niceMax(Math.max(1e-9, ...series.flatMap((s) => s.values)));
    const s = svg("svg", { class: "spark", viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": label, preserveAspectRatio: "none" });
    for (const se of series) {
      const n = se.values.length;
      if (n < 2) continue;
      const pts = se.values.map((v, i) => `${(i / (n - 1)) * w},${h - 1 - (v / max) * (h - 2)}`).join(" ");
      s.append(svg("polyline", { points: pts, fill: "none", stroke: se.color, "stroke-width": 1.5, "vector-effect": "non-scaling-stroke" }));
    }
    return s;
  }
  // chart draws an x/y chart. opts: {label, xLabel, yLabel, xMax, yMax,
  // series: [{name, color, points: [[x, y]...], step}], bars: {width,
  // stacks: [{name, color, values: [y per bin]}], attrs(i) → data attributes}}.
  function chart(opts) {
    const W = 900, H = opts.height || 220, L = 52, R = 12, T = 12, B = 34;
    const pw = W - L - R, ph = H - T - B;
    let yMax = opts.yMax;
    if (yMax === undefined) {
      let m = 0;
      for (const se of opts.series || []) for (const p of se.points) m = Math.max(m, p[1]);
      if (opts.bars) {
        const n = opts.bars.stacks[0].values.length;
        for (let i = 0; i < n; i++) m = Math.max(m, opts.bars.stacks.reduce((a, st) => a + st.values[i], 0));
      }
      yMax = niceMax(m);
    }
    const xMax = opts.xMax || 1;
    const x = (v) => L + (v / xMax) * pw, y = (v) => T + ph - (v / yMax) * ph;
    const s = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.label });
    // axes and ticks
    s.append(svg("line", { class: "axis", x1: L, y1: T + ph, x2: L + pw, y2: T + ph }));
    s.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: T + ph }));
    for (let i = 0; i <= 4; i++) {
      const v = (yMax * i) / 4;
      s.append(svg("line", { class: "axis", x1: L - 4, y1: y(v), x2: L + pw, y2: y(v), "stroke-opacity": i ? 0.35 : 1 }));
      s.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, obol.fmt(opts.yTick ? opts.yTick(v) : v)));
    }
    const xStep = niceMax(xMax / 8);
    for (let v = 0; v <= xMax + 1e-9; v += xStep) {
      s.append(svg("line", { class: "axis", x1: x(v), y1: T + ph, x2: x(v), y2: T + ph + 4 }));
      s.append(svg("text", { x: x(v), y: T + ph + 16, "text-anchor": "middle" }, obol.fmt(v)));
    }
    s.append(svg("text", { x: L + pw, y: H - 3, "text-anchor": "end" }, opts.xLabel || ""));
    s.append(svg("text", { x: L + 6, y: T + 10 }, opts.yLabel || ""));
    if (opts.bars) {
      const b = opts.bars, g = svg("g", { class: "bars" });
      const n = b.stacks[0].values.length;
      for (let i = 0; i < n; i++) {
        let base = 0;
        const grp = svg("g", b.attrs ? b.attrs(i) : {});
        for (const st of b.stacks) {
          const v = st.values[i];
          if (v > 0) grp.append(svg("rect", { x: x(i * b.width) + 0.5, width: Math.max(1, x(b.width) - x(0) - 1), y: y(base + v), height: y(base) - y(base + v), fill: st.color },
            svg("title", {}, `${st.name}: ${v} at ${obol.fmt(i * b.width)}–${obol.fmt((i + 1) * b.width)} s`)));
          base += v;
        }
        g.append(grp);
      }
      s.append(g);
    }
    for (const se of opts.series || []) {
      if (!se.points.length) continue;
      let d = "";
      se.points.forEach((p, i) => {
        if (i === 0) d += `M${x(p[0])},${y(p[1])}`;
        else if (se.step) d += `H${x(p[0])}V${y(p[1])}`;
        else d += `L${x(p[0])},${y(p[1])}`;
      });
      if (se.step) d += `H${x(xMax)}`;
      s.append(svg("path", { d, fill: "none", stroke: se.color, "stroke-width": 2, "data-series": se.name }));
    }
    return s;
  }
  // scatter draws points over an x axis the caller lays out: every x is a
  // position in [0, 1] (so the caller picks a linear or a log scale, and
  // may set slots apart, as the drift sweep's tick-only slot). opts:
  // {label, yLabel, height, yMin (0), yMax (from the values), yTick(v) →
  // text, xTicks: [[x, text]], series: [{name, color, points: [{x, y,
  // attrs, title}]}] (joined by a line, each a circle carrying its attrs),
  // marks: [{x, y, color, attrs, title}] (squares, not joined), hlines:
  // [{y, text, class}] (the text above the line's right end),
  // vlines: [{x, text, class}]}.
  function scatter(opts) {
    const W = 900, H = opts.height || 190, L = 64, R = 12, T = 14, B = 30;
    const pw = W - L - R, ph = H - T - B;
    const ys = (opts.series || []).flatMap((se) => se.points.map((p) => p.y)).concat((opts.marks || []).map((m) => m.y));
    const y0 = opts.yMin || 0, y1 = opts.yMax > y0 ? opts.yMax : y0 + niceMax(Math.max(0, ...ys) - y0);
    const x = (p) => L + p * pw, y = (v) => T + ph - ((Math.min(y1, Math.max(y0, v)) - y0) / (y1 - y0)) * ph;
    const s = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.label });
    s.append(svg("line", { class: "axis", x1: L, y1: T + ph, x2: L + pw, y2: T + ph }));
    s.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: T + ph }));
    for (let i = 0; i <= 4; i++) {
      const v = y0 + ((y1 - y0) * i) / 4;
      s.append(svg("line", { class: "axis", x1: L - 4, y1: y(v), x2: L + pw, y2: y(v), "stroke-opacity": i ? 0.35 : 1 }));
      s.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, opts.yTick ? opts.yTick(v) : obol.fmt(v)));
    }
    for (const [p, text] of opts.xTicks || []) {
      s.append(svg("line", { class: "axis", x1: x(p), y1: T + ph, x2: x(p), y2: T + ph + 4 }));
      s.append(svg("text", { x: x(p), y: T + ph + 16, "text-anchor": "middle" }, text));
    }
    s.append(svg("text", { x: L + 6, y: T + 10 }, opts.yLabel || ""));
    for (const h of opts.hlines || []) {
      s.append(svg("line", { class: h.class || "guide", x1: L, y1: y(h.y), x2: L + pw, y2: y(h.y) }));
      if (h.text) s.append(svg("text", { x: L + pw - 4, y: y(h.y) - 4, "text-anchor": "end" }, h.text));
    }
    for (const v of opts.vlines || []) {
      s.append(svg("line", { class: v.class || "guide", x1: x(v.x), y1: T, x2: x(v.x), y2: T + ph }));
      if (v.text) s.append(svg("text", { x: x(v.x) + 4, y: T + 10 }, v.text));
    }
    for (const se of opts.series || []) {
      if (se.points.length > 1) {
        s.append(svg("path", { d: se.points.map((p, i) => `${i ? "L" : "M"}${x(p.x)},${y(p.y)}`).join(""), fill: "none", stroke: se.color, "stroke-width": 2, "data-series": se.name }));
      }
      for (const p of se.points) {
        s.append(svg("circle", { cx: x(p.x), cy: y(p.y), r: 4, fill: se.color, ...(p.attrs || {}) }, svg("title", {}, p.title || "")));
      }
    }
    for (const m of opts.marks || []) {
      s.append(svg("rect", { x: x(m.x) - 4.5, y: y(m.y) - 4.5, width: 9, height: 9, fill: m.color, ...(m.attrs || {}) }, svg("title", {}, m.title || "")));
    }
    return s;
  }
  // legend returns an HTML legend for [{name, color}].
  function legend(items) {
    const d = obol.el("div", { class: "legend" });
    for (const it of items) {
      const sp = obol.el("span", { text: it.name });
      sp.style.color = it.color;
      d.append(sp);
    }
    return d;
  }
  // color reads a CSS variable (--granted, --t1...).
  function color(name) { return getComputedStyle(document.documentElement).getPropertyValue("--" + name).trim(); }
  return { spark, chart, scatter, legend, color, niceMax };
})();
