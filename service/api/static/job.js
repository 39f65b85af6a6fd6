// The job page: rounds, charts, SLO verdict and final configuration, kept live from the job's event stream.
"use strict";
const JobPage = (() => {
  const {api, follow, el, badge, stateBadge, problemBox, fmt, when, bold, TERMINAL} = window.UI;
  const RELOAD_ON = new Set(["job_started", "round_started", "round_measured", "round_finished", "decision",
                             "branch_started", "step_skipped", "job_interrupted", "job_finished"]);

  let liveText = "Live: following the job's events";
  let loads = 0;

  async function show(app, id) {
    document.title = `Job ${id} - sglang-tuner`;
    let job;
    try {
      job = await load(app, id);
    } catch (error) {
      app.replaceChildren(el("h1", {}, `Job ${id}`), problemBox(error));
      return;
    }
    if (!TERMINAL.has(job.state)) live(app, id);
  }

  // `wait`: long-poll the job (read from the database) rather than take the view polling answers from, which may
  // be half a second behind; once the stream has ended the job has finished, and the long-poll answers at once.
  async function load(app, id, wait = 0) {
    const mine = ++loads;
    const [job, report] = await Promise.all([api(`/v1/jobs/${id}${wait ? `?wait=${wait}` : ""}`),
                                             api(`/v1/jobs/${id}/report`)]);
    if (mine === loads) render(app, job, report);  // an earlier load answering late never overwrites a later one
    return job;
  }

  function live(app, id) {
    let timer = null, ended = false;
    const reload = () => {
      if (timer) return;
      timer = setTimeout(() => { timer = null; if (!ended) load(app, id).catch(() => {}); }, 200);
    };
    follow(`/v1/jobs/${id}/events`, (event) => {
      if (!RELOAD_ON.has(event.event)) return;
      liveText = `Live: last event ${event.event.replace(/_/g, " ")}` +
        (event.data && event.data.round !== undefined ? ` (round ${event.data.round})` : "");
      const status = document.getElementById("live");
      if (status) status.textContent = liveText;
      reload();
    }).then(() => { ended = true; return load(app, id, 30).catch(() => {}); });
  }

  function render(app, job, report) {
    const charts = report.charts || {figures: [], targets: [], rounds: [], deployments: [], chosen: null};
    const scroll = window.scrollY;
    app.replaceChildren(...[
      header(job, report),
      report.headline.length ? el("div", {class: "notice"}, report.headline.map((l) => el("p", {}, bold(l)))) : null,
      (report.warnings || []).length ? [el("h2", {}, "Scenario warnings"),
        el("ul", {id: "scenario-warnings"}, report.warnings.map((w) => el("li", {}, w)))] : null,
      el("h2", {}, "SLO verdict"), slo(report),
      el("h2", {}, "Where each deployment landed"),
      el("div", {class: "grid", id: "frontiers"}, Charts.frontiers(charts)),
      charts.deployments.length ? null : el("p", {class: "muted"}, "No deployment measured yet."),
      el("h2", {}, "Figures per round"),
      el("p", {class: "small muted"}, "Large dots: the mean over a round's repeats (the figure its decision used), " +
        "coloured by verdict; small dots: each repeat; red dashed line: the SLO target."),
      el("div", {class: "grid", id: "per-round"}, Charts.perRound(charts)),
      el("h2", {}, "Rounds"), rounds(report, charts),
      report.skipped.length ? [el("h2", {}, "Steps not run"),
        el("ul", {}, report.skipped.map((s) => el("li", {}, el("b", {}, s.technique), `: ${s.reason}`)))] : null,
      el("h2", {}, "Final configuration"), final(report, charts)].flat().filter(Boolean));
    window.scrollTo(0, scroll);
  }

  function header(job, report) {
    const r = report.job;
    const links = ["json", "markdown", "html"].map((f) => el("a", {href: `/v1/jobs/${job.id}/report?format=${f}`},
      `report (${f})`));
    links.push(el("a", {href: `/v1/jobs/${job.id}/frontier`}, "frontier (json)"));
    const cancel = TERMINAL.has(job.state) ? null : el("button", {id: "cancel", onclick: async (e) => {
      e.target.disabled = true;
      try { await api(`/v1/jobs/${job.id}/cancel`, {method: "POST"}); } catch (error) {
        e.target.after(problemBox(error));
      }
    }}, "Cancel job");
    return el("div", {},
      el("h1", {}, `${job.playbook}`, r.scenario ? ` on ${r.scenario}` : "", " ", stateBadge(job.state)),
      el("p", {class: "muted"}, "Job ", el("code", {id: "job-id"}, job.id), ` on runner ${job.runner}`,
        r.seed !== null && r.seed !== undefined ? `, seed ${r.seed}` : "",
        `; created ${when(job.created_at)}`, job.finished_at ? `, finished ${when(job.finished_at)}` : "",
        r.max_rounds ? `; ${r.rounds_used} of ${r.max_rounds} rounds, ${fmt(r.gpu_minutes)} GPU-minutes` : ""),
      job.stop_reason ? el("p", {}, `Ending: ${job.stop_reason}`) : null,
      el("p", {class: "small"}, links.flatMap((a, i) => (i ? [" · ", a] : [a])), " ", cancel),
      TERMINAL.has(job.state) ? null : el("p", {id: "live", class: "small muted"}, liveText));
  }

  function slo(report) {
    if (!report.slo) {
      const running = !TERMINAL.has(report.job.state);
      return el("p", {class: "muted", id: "slo"}, running ? "The job has not ended: no verdict yet." :
        "No deployment was measured: nothing to assess.");
    }
    const met = report.slo.met;
    const cards = [el("div", {class: "card"}, "Final deployment",
      el("b", {class: met ? "slo-met" : "slo-missed"}, met ? "meets its SLO" : "misses its SLO"))];
    for (const c of report.slo.checks) {
      cards.push(el("div", {class: "card"}, c.name.replace(/_/g, " "),
        el("b", {class: c.met ? "slo-met" : "slo-missed"}, c.actual === null ? "unmeasured" : fmt(c.actual)),
        `target ${fmt(c.target)}: ${c.met ? "met" : "NOT met"}`));
    }
    return el("div", {id: "slo"}, el("div", {class: "cards"}, cards),
      report.capacity.length ? el("div", {class: "notice", id: "capacity"}, el("b", {}, "Capacity needed: "),
        report.capacity.map((line) => el("p", {}, line))) : null);
  }

  function changeList(round, chart) {
    if (round.delta === null) return el("span", {class: "muted"}, "starting deployment");
    const changes = chart ? chart.changes : null;
    if (!changes || !changes.length) return el("span", {}, round.delta.summary);
    const show = (v) => (v === null || v === undefined ? "unset" : String(v));
    return el("div", {}, el("div", {class: "small"}, round.delta.summary), el("ul", {class: "change"},
      changes.map((c) => el("li", {}, el("code", {}, `${c.where ? `${c.where} ` : ""}${c.flag}`),
        ` ${show(c.before)} → ${show(c.after)}`))));
  }

  const HEADLINE = new Set(["output_throughput", "p99_ttft_ms", "median_itl_ms"]);
  let bounded = new Set();  // the figures the SLO bounds, shown with the headline ones

  function decisionFigures(figures) {
    const names = Object.keys(figures).filter((k) => k.endsWith(".change")).map((k) => k.slice(0, -7));
    if (!names.length) return el("span", {class: "muted"}, "-");
    const pct = (v) => `${v >= 0 ? "+" : ""}${(100 * v).toFixed(1)}%`;
    const line = (n) => {
      const f = (s) => figures[`${n}.${s}`];
      const ci = f("ci_low") !== undefined && f("ci_low") !== null ? `, 95% CI ${pct(f("ci_low"))}..${pct(f("ci_high"))}` : "";
      const p = typeof f("p") === "number" ? `, p=${f("p") < 0.001 ? "<0.001" : f("p").toFixed(3)}` : "";
      const values = f("baseline") !== undefined ? `${fmt(f("baseline"))} → ${fmt(f("candidate"))} ` : "";
      return el("li", {}, `${Charts.label(n)}: ${values}(${pct(f("change"))}${ci}${p})`);
    };
    const first = names.filter((n) => HEADLINE.has(n) || bounded.has(n));
    const rest = names.filter((n) => !first.includes(n));
    return el("div", {}, el("ul", {class: "figs"}, first.map(line)), rest.length ? el("details", {},
      el("summary", {}, `${rest.length} more figures`), el("ul", {class: "figs"}, rest.map(line))) : null);
  }

  function rounds(report, charts) {
    const byIndex = new Map(charts.rounds.map((r) => [r.index, r]));
    bounded = new Set(charts.targets.map((t) => t.figure));
    const chosen = report.path.length ? report.path[report.path.length - 1] : null;
    const rows = report.rounds.map((r) => {
      const reasons = r.reasons || [];
      const cls = [r.state === "running" || r.state === "pending" ? "running" : "", report.final && r.index === chosen ? "chosen" : ""]
        .filter(Boolean).join(" ");
      const verdict = r.verdict ? [badge(r.verdict.replace(/_/g, " "), `v-${r.verdict}`),
        r.pattern && r.pattern !== "not_applicable" ? el("div", {class: "small muted"}, r.pattern.replace(/_/g, " ")) : null]
        : el("span", {class: "muted"}, r.state);
      return el("tr", {class: cls || null, "data-round": r.index},
        el("td", {class: "num"}, r.index, r.line !== null ? el("div", {class: "small muted"}, `branch of ${r.line}`) : null),
        el("td", {}, r.technique, r.retry_of !== null ? el("div", {class: "small muted"}, `retry of ${r.retry_of}`) : null),
        el("td", {}, changeList(r, byIndex.get(r.index))),
        el("td", {}, verdict),
        el("td", {}, decisionFigures(r.figures || {})),
        el("td", {class: "small"}, reasons.length ? reasons[0] : (r.state === "running" ? "measuring..." : "-"),
          reasons.length > 1 ? el("details", {}, el("summary", {}, `${reasons.length - 1} more`),
            el("ul", {}, reasons.slice(1).map((x) => el("li", {}, x)))) : null),
        el("td", {class: "small"}, r.source || "-", r.repeats ? el("div", {class: "muted"}, `${r.repeats} repeats`) : null));
    });
    return el("table", {id: "rounds"},
      el("thead", {}, el("tr", {}, ["Round", "Technique", "Change against the accepted deployment", "Decision",
        "Figures the decision used (change, 95% CI)", "Reason", "Source"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows));
  }

  const SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;
  const quote = (s) => (s !== "" && SAFE.test(s) ? s : `'${s.replace(/'/g, "'\"'\"'")}'`);
  const shellLine = (c) => [...Object.entries(c.env || {}).map(([k, v]) => `${k}=${v}`), ...c.argv.map(quote)].join(" ");

  function final(report, charts) {
    const f = report.final;
    if (!f) return el("p", {class: "muted", id: "final"}, TERMINAL.has(report.job.state)
      ? "No final configuration: the starting deployment was never measured." : "The job has not ended yet.");
    const chosen = charts.deployments.find((d) => d.chosen);
    const commands = [...f.launch_commands, ...(f.router_command ? [f.router_command] : [])];
    const text = commands.map((c) => `# ${c.name} on ${c.host}\n${shellLine(c)}`).join("\n");
    const copy = el("button", {id: "copy", onclick: async (e) => {
      try { await navigator.clipboard.writeText(text); e.target.textContent = "Copied"; } catch (_) {
        const range = document.createRange();
        range.selectNodeContents(document.getElementById("launch"));
        getSelection().removeAllRanges(); getSelection().addRange(range);
        e.target.textContent = "Selected: press Ctrl+C";
      }
    }}, "Copy commands");
    return el("div", {id: "final"},
      el("p", {}, `Model `, el("code", {}, f.model),
        chosen ? `; ${chosen.gpus} GPUs; measured in round ${chosen.round} (${chosen.source})` : "",
        report.path.length ? `; reached by rounds ${report.path.join(" → ")}` : ""),
      f.launch_refused.length ? el("p", {class: "problem"}, "The flag catalogue refused the launch commands: " +
        f.launch_refused.join("; ")) : [el("p", {}, copy), el("pre", {class: "cmd", id: "launch"}, text)]);
  }

  return {show};
})();
window.JobPage = JobPage;
