// The job page's charts, drawn with Observable Plot from the report's `charts` (GET /v1/jobs/{id}/report).
"use strict";
const Charts = (() => {
  const {el, fmt} = window.UI;
  const LABELS = {
    output_throughput: "output tok/s", output_throughput_per_gpu: "output tok/s per GPU",
    request_throughput: "requests/s", request_goodput: "goodput req/s", p95_ttft_ms: "p95 TTFT (ms)",
    p99_ttft_ms: "p99 TTFT (ms)", median_ttft_ms: "median TTFT (ms)", median_itl_ms: "median ITL (ms)",
    p99_itl_ms: "p99 ITL (ms)", p95_e2e_latency_ms: "p95 end-to-end latency (ms)",
    cost_per_1m_output_tokens: "$ per 1M output tokens", failure_rate: "failure rate",
  };
  const COLORS = {
    domain: ["starting point", "accept", "keep_tradeoff", "rollback", "inconclusive", "error", "undecided"],
    range: ["#374151", "#1a7f4b", "#d97706", "#b42318", "#6b7280", "#7c3aed", "#2563eb"],
  };
  const label = (name) => LABELS[name] || name.replace(/_/g, " ");
  const kind = (d) => (d.technique === "baseline" ? "starting point" : d.verdict || "undecided");
  const sources = (items) => [...new Set(items.map((d) => d.source))].join(", ") || "-";
  const used = (items, of, domain, range) => {  // a legend of the categories the chart shows
    const present = domain.map((d, i) => [d, range[i]]).filter(([d]) => items.some((x) => of(x) === d));
    return {domain: present.map((p) => p[0]), range: present.map((p) => p[1])};
  };
  const width = () => Math.max(360, Math.min(620, (document.getElementById("app").clientWidth - 40) / 2));

  function figure(id, title, items, plot, note) {
    return el("figure", {"data-chart": id},
      el("figcaption", {}, title, " ", el("span", {class: "source"}, `figures: ${sources(items)}`)),
      plot, note ? el("p", {class: "small muted"}, note) : null);
  }

  // Each headline figure per round: the mean the decision used, every repeat as a point, the SLO target as a line.
  function perRound(charts) {
    const out = [];
    const colors = used(charts.rounds, kind, COLORS.domain, COLORS.range);
    for (const name of charts.figures) {
      const rows = charts.rounds.filter((r) => r.figures[name] !== null && r.figures[name] !== undefined);
      if (!rows.length) continue;
      const value = (r) => r.figures[name];
      const repeats = rows.flatMap((r) => (r.repeats[name] || []).map((v) => ({index: r.index, value: v})));
      const targets = charts.targets.filter((t) => t.figure === name);
      const plot = Plot.plot({
        width: width(), height: out.length ? 250 : 280, marginLeft: 60, marginRight: 20, insetTop: 8, insetBottom: 8,
        x: {type: "point", label: "round", padding: 0.4},
        y: {grid: true, label: label(name), zero: !name.endsWith("_ms")},
        color: {...colors, legend: out.length === 0},
        marks: [
          Plot.ruleY(targets, {y: "target", stroke: "#b42318", strokeWidth: 1.5, strokeDasharray: "6,4"}),
          Plot.text(targets, {y: "target", text: (t) => `SLO ${fmt(t.target)}`, frameAnchor: "right",
                              textAnchor: "end", dy: -7, fill: "#b42318", fontSize: 11}),
          Plot.line(rows.filter((r) => r.line === null), {x: "index", y: value, stroke: "#cbd5e1"}),
          Plot.dot(repeats, {x: "index", y: "value", r: 2.5, fill: "#64748b", fillOpacity: 0.5,
                             ariaDescription: "repeats"}),
          Plot.dot(rows, {x: "index", y: value, r: 5.5, fill: kind, stroke: "white", ariaDescription: "rounds",
                          channels: {change: "summary", source: "source"}, tip: {format: {x: true, y: (v) => fmt(v)}}}),
        ],
      });
      out.push(figure(`round-${name}`, `${label(name)} per round`, rows, plot,
        targets.length ? null : "no SLO target bounds this figure"));
    }
    return out;
  }

  // One Pareto chart: every measured deployment, its frontier joined, the SLO region shaded, the chosen one ringed.
  function frontier(charts, id, xName, yName, key, title) {
    const points = charts.deployments.filter((d) => d.figures[xName] != null && d.figures[yName] != null);
    if (!points.length) return null;
    const x = (d) => d.figures[xName];
    const y = (d) => d.figures[yName];
    const front = points.filter((d) => d.frontiers[key]).sort((a, b) => x(a) - x(b));
    const xTargets = charts.targets.filter((t) => t.figure === xName && t.lower_is_better);
    const yTargets = charts.targets.filter((t) => t.figure === yName && t.lower_is_better);
    const chosen = points.filter((d) => d.chosen);
    const standing = (d) => (d.slo_met === null ? "no SLO" : d.slo_met ? "SLO met" : "SLO missed");
    const [x0, x1] = span(points.map(x), xTargets);
    const [y0, y1] = span(points.map(y), yTargets);
    const plot = Plot.plot({
      width: width(), height: 340, marginLeft: 60, marginRight: 30, inset: 6,
      x: {grid: true, label: `${label(xName)} →`, domain: [x0, x1]},
      y: {grid: true, label: `${label(yName)}`, domain: [y0, y1]},
      color: {...used(points, kind, COLORS.domain, COLORS.range), legend: true},
      symbol: {...used(points, standing, ["SLO met", "SLO missed", "no SLO"], ["circle", "times", "square"]),
               legend: true},
      marks: [
        Plot.rect(xTargets, {x1: x0, x2: "target", fill: "#16a34a", fillOpacity: 0.08, ariaDescription: "slo-region"}),
        Plot.rect(yTargets, {y1: y0, y2: "target", fill: "#16a34a", fillOpacity: 0.08, ariaDescription: "slo-region"}),
        Plot.ruleX(xTargets, {x: "target", stroke: "#b42318", strokeDasharray: "6,4"}),
        Plot.ruleY(yTargets, {y: "target", stroke: "#b42318", strokeDasharray: "6,4"}),
        Plot.text(xTargets, {x: "target", text: (t) => `SLO ${fmt(t.target)}`, frameAnchor: "bottom", dx: -4, dy: -4,
                             textAnchor: "end", fill: "#b42318", fontSize: 11}),
        Plot.line(front, {x, y, stroke: "#111827", strokeWidth: 1.5, strokeDasharray: "3,3", curve: "step-after",
                          ariaDescription: "frontier"}),
        Plot.dot(chosen, {x, y, r: 11, stroke: "#1a7f4b", strokeWidth: 2.5, ariaDescription: "chosen"}),
        Plot.dot(points, {x, y, r: 5.5, fill: kind, stroke: kind, strokeWidth: 1.5, ariaDescription: "deployments",
                          symbol: standing,
                          channels: {round: "round", change: "summary", GPUs: "gpus", source: "source"},
                          tip: {format: {x: (v) => fmt(v), y: (v) => fmt(v)}}}),
        Plot.text(points, {x, y, text: (d) => `r${d.round}${d.chosen ? " chosen" : ""}`, dx: 9, dy: -9,
                           textAnchor: "start", fontSize: 10.5, fill: "#374151"}),
      ],
    });
    const note = `${points.length} deployment${points.length === 1 ? "" : "s"} measured; ${front.length} on the ` +
      "frontier (dashed): none of the others beats them on both figures. Green: where the SLO target holds.";
    return figure(id, title, points, plot, note);
  }

  // A domain around the points and the SLO target, with a margin (targets far away are still shown).
  function span(values, targets) {
    const all = [...values, ...targets.map((t) => t.target)];
    const lo = Math.min(...all), hi = Math.max(...all);
    const pad = (hi - lo || Math.abs(hi) || 1) * 0.08;
    return [Math.max(0, lo - pad), hi + pad];
  }

  function frontiers(charts) {
    return [
      frontier(charts, "frontier-ttft", "p95_ttft_ms", "output_throughput_per_gpu", "p95_ttft_ms",
               "Pareto frontier: output tok/s per GPU against p95 TTFT"),
      frontier(charts, "frontier-itl", "median_itl_ms", "output_throughput_per_gpu", "median_itl_ms",
               "Pareto frontier: output tok/s per GPU against median ITL"),
      frontier(charts, "frontier-cost", "p95_ttft_ms", "cost_per_1m_output_tokens", "cost_per_1m_output_tokens",
               "Cost per 1M output tokens against p95 TTFT"),
    ].filter(Boolean);
  }

  return {perRound, frontiers, label};
})();
window.Charts = Charts;
