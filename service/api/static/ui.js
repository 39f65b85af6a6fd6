// sglang-tuner web UI: the API client (key in session storage), the event stream, and the jobs page.
"use strict";
const UI = (() => {
  const KEY = "sglang-tuner-api-key";
  const TERMINAL = new Set(["succeeded", "slo_not_met", "failed", "cancelled"]);

  class ApiError extends Error {
    constructor(status, problem) {
      super(problem.detail || problem.title || `HTTP ${status}`);
      this.status = status;
      this.problem = problem;
    }
  }

  const key = () => sessionStorage.getItem(KEY);

  function headers(extra) {
    const h = {Accept: "application/json", ...extra};
    if (key()) h.Authorization = `Bearer ${key()}`;
    return h;
  }

  async function api(path, {method = "GET", body, signal} = {}) {
    const init = {method, headers: headers(body === undefined ? {} : {"Content-Type": "application/json"}), signal};
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(path, init);
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = {detail: text}; }
    if (!response.ok) {
      const error = new ApiError(response.status, data || {});
      if (response.status === 401 || response.status === 403) askForKey(error);
      throw error;
    }
    return data;
  }

  // Server-Sent Events read over fetch, so the key travels in a header (EventSource cannot send one).
  async function follow(path, onEvent, {signal, after = 0} = {}) {
    let last = after;
    for (let attempt = 0; attempt < 50 && !(signal && signal.aborted); attempt++) {
      try {
        const response = await fetch(`${path}?after=${last}`, {headers: headers({Accept: "text/event-stream"}), signal});
        if (!response.ok) throw new ApiError(response.status, {});
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "", raw = "";
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          // Lines end in CR LF, LF or CR; a CR at the end of a chunk waits for the LF that may follow it.
          raw += decoder.decode(value, {stream: true});
          const keep = raw.endsWith("\r") ? 1 : 0;
          buffer += raw.slice(0, raw.length - keep).replace(/\r\n?/g, "\n");
          raw = raw.slice(raw.length - keep);
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const event = parseEvent(block);
            if (!event) continue;
            if (event.id) last = Number(event.id);
            if (onEvent(event) === false || event.event === "job_finished") return;
          }
        }
        return;
      } catch (error) {
        if (signal && signal.aborted) return;
        if (error instanceof ApiError && error.status >= 400 && error.status < 500) return;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  function parseEvent(block) {
    const event = {event: "message", data: ""};
    let seen = false;
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const at = line.indexOf(":");
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (field === "data") event.data += value;
      else event[field] = value;
      seen = true;
    }
    if (!seen) return null;
    try { event.data = event.data ? JSON.parse(event.data) : {}; } catch (_) { /* keep the text */ }
    return event;
  }

  // -- rendering helpers ----------------------------------------------------------------------------------

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const badge = (text, cls) => el("span", {class: `badge ${cls}`}, text);
  const stateBadge = (state) => badge(state.replace(/_/g, " "), `s-${state}`);

  function problemBox(error) {
    const p = error.problem || {};
    const lines = [p.title ? `${p.title}: ${error.message}` : error.message];
    if (p.field) lines.push(`field: ${p.field}`);
    if (p.hint) lines.push(`fix: ${p.hint}`);
    return el("p", {class: "problem", role: "alert"}, lines.join("\n"));
  }

  function fmt(value, digits = 3) {
    if (value === null || value === undefined || Number.isNaN(value)) return "-";
    const a = Math.abs(value);
    if (a >= 1000) return Math.round(value).toLocaleString("en-US");
    return Number(value.toPrecision(digits)).toString();
  }

  function when(iso) {
    if (!iso) return "-";
    const d = new Date(iso);
    return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  function bold(text) {  // the report's headline marks its verdict **like this**
    return text.split("**").map((part, i) => (i % 2 ? el("strong", {}, part) : part));
  }

  // -- the key ------------------------------------------------------------------------------------------

  function askForKey(error) {
    const bar = document.getElementById("key-bar");
    bar.hidden = false;
    const message = document.getElementById("key-message");
    message.hidden = false;
    message.textContent = key() ? `The key was refused: ${error.message}` : `${error.message}. Paste an API key.`;
  }

  function setupKey() {
    document.getElementById("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY, document.getElementById("key-input").value.trim());
      location.reload();
    });
    const state = document.getElementById("key-state");
    if (key()) {
      state.append("API key set for this tab ", el("a", {href: "#", onclick: (e) => {
        e.preventDefault(); sessionStorage.removeItem(KEY); location.reload();
      }}, "forget"));
    }
  }

  // -- the jobs page ------------------------------------------------------------------------------------

  const summaries = new Map();  // finished jobs' report summaries: a finished job's report never changes

  async function jobsPage(app) {
    document.title = "Jobs - sglang-tuner";
    app.replaceChildren(el("h1", {}, "Tuning jobs"), startForm(), el("h2", {}, "Jobs"),
                        el("div", {id: "jobs"}, el("p", {class: "muted"}, "Loading...")));
    const refresh = async () => {
      try {
        const page = await api("/v1/jobs?limit=25");
        await Promise.all(page.items.map(summarise));
        document.getElementById("jobs").replaceChildren(jobsTable(page.items));
        return page.items.some((job) => !TERMINAL.has(job.state));
      } catch (error) {
        document.getElementById("jobs").replaceChildren(problemBox(error));
        return false;
      }
    };
    const loop = async () => { if (await refresh()) setTimeout(loop, 2000); };
    loop();
  }

  async function summarise(job) {
    const known = summaries.get(job.id);
    if (known && known.state === job.state && TERMINAL.has(job.state)) return;
    if (job.state === "queued") return;
    try {
      const report = await api(`/v1/jobs/${job.id}/report`);
      const rounds = report.rounds.filter((r) => r.state !== "interrupted");
      summaries.set(job.id, {
        state: job.state,
        slo: report.slo ? report.slo.met : null,
        done: rounds.filter((r) => r.verdict !== null).length,
        max: report.job.max_rounds,
        running: rounds.filter((r) => r.state === "running").map((r) => r.technique),
      });
    } catch (_) { /* the row shows what the listing knows */ }
  }

  function jobsTable(jobs) {
    if (!jobs.length) return el("p", {class: "muted"}, "No jobs yet: start one above.");
    const rows = jobs.map((job) => {
      const s = summaries.get(job.id);
      let slo = "-";
      if (s && s.slo !== null) slo = badge(s.slo ? "met" : "not met", s.slo ? "slo-met" : "slo-missed");
      let progress = job.state === "queued" ? `queued${job.queue_position ? ` (#${job.queue_position})` : ""}` : "-";
      if (s) {
        progress = `${s.done} round${s.done === 1 ? "" : "s"} decided`;
        if (s.max) progress += ` (budget ${s.max})`;
        if (s.running.length) progress += `, running ${s.running.join(", ")}`;
      }
      return el("tr", {"data-job": job.id},
        el("td", {}, el("a", {href: `/ui/jobs/${job.id}`}, el("code", {}, job.id))),
        el("td", {}, job.playbook), el("td", {}, job.runner), el("td", {}, stateBadge(job.state)),
        el("td", {class: "slo"}, slo), el("td", {class: "progress"}, progress),
        el("td", {class: "small"}, when(job.created_at)), el("td", {class: "small muted"}, job.stop_reason || ""));
    });
    return el("table", {class: "jobs"},
      el("thead", {}, el("tr", {}, ["Job", "Playbook", "Runner", "State", "SLO", "Progress", "Created", "Ending"]
        .map((h) => el("th", {}, h)))), el("tbody", {}, rows));
  }

  function startForm() {
    const playbooks = el("select", {name: "playbook", id: "playbook", required: true});
    const error = el("div", {id: "start-error"});
    const form = el("form", {class: "start", id: "start-form"},
      el("label", {}, "Playbook", playbooks),
      el("label", {}, "Scenario file (optional: TOML or JSON; the playbook's own otherwise)",
         el("input", {type: "file", name: "scenario", id: "scenario-file", accept: ".toml,.json"})),
      el("label", {}, "Seed", el("input", {type: "number", name: "seed", min: 0, value: 0, style: "width:6em"})),
      el("button", {type: "submit", id: "start"}, "Start job"));
    api("/v1/playbooks").then((items) => {
      playbooks.replaceChildren(...items.map((p) => el("option", {value: p.name, title: p.description},
        `${p.name}${p.details && p.details.scenario ? "" : " (needs a scenario file)"}`)));
      const preferred = items.find((p) => p.name === "coding-assistant");
      if (preferred) playbooks.value = preferred.name;
    }).catch((e) => error.replaceChildren(problemBox(e)));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.replaceChildren();
      try {
        const body = {playbook: playbooks.value, seed: Number(form.elements.seed.value || 0)};
        const file = form.elements.scenario.files[0];
        if (file) body.scenario = await readScenario(file);
        const job = await api("/v1/jobs", {method: "POST", body});
        location.href = `/ui/jobs/${job.id}`;
      } catch (e) {
        error.replaceChildren(problemBox(e));
      }
    });
    return el("div", {}, form, error);
  }

  async function readScenario(file) {
    const text = await file.text();
    if (file.name.toLowerCase().endsWith(".json")) {
      try { return JSON.parse(text); } catch (e) {
        throw new ApiError(422, {title: "Invalid scenario file", detail: `${file.name} is not JSON: ${e.message}`,
                                 field: "scenario", hint: "send a TOML scenario file, or valid JSON"});
      }
    }
    try {
      return (await api("/v1/scenarios/decode", {method: "POST", body: {toml: text}})).scenario;
    } catch (e) {
      e.message = `${file.name}: ${e.message}`;
      throw e;
    }
  }

  function start() {
    setupKey();
    const app = document.getElementById("app");
    const match = location.pathname.match(/^\/ui\/jobs\/([^/]+)\/?$/);
    if (match) window.JobPage.show(app, decodeURIComponent(match[1]));
    else jobsPage(app);
  }

  document.addEventListener("DOMContentLoaded", start);
  return {api, follow, el, badge, stateBadge, problemBox, fmt, when, bold, TERMINAL, ApiError};
})();
window.UI = UI;
