// The streamrun console: it reads and changes the run through the
// control API (/api/v1) only, and draws with the DOM and SVG.
"use strict";

const API = "/api/v1";
const SVG = "http://www.w3.org/2000/svg";
// A symbol for each state, so that it reads without colour.
const SYMBOLS = {healthy: "✔", degraded: "⚠", paused: "⏸", reloading: "↻", starting: "↻", stopping: "■", stopped: "■", failed: "✖"};

const ui = {
  selected: null,     // the selected pipeline's name
  pipelines: [],
  tap: null,          // the open EventSource
  dryRunOf: null,     // the content the last successful dry run was of
  token: sessionStorage.getItem("streamrun-token") || "",
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c === null || c === undefined ? "" : c);
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function stateLabel(state) {
  return el("span", {class: "state state-" + state}, (SYMBOLS[state] || "•") + " " + state);
}

async function api(method, path, body) {
  const headers = {};
  if (ui.token) headers["Authorization"] = "Bearer " + ui.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(API + path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  let data = null;
  try { data = await resp.json(); } catch (e) { data = null; }
  if (resp.status === 401) $("token-form").hidden = false;
  return {status: resp.status, ok: resp.ok, data};
}

function setStatus(text, bad) {
  const s = $("status");
  s.textContent = text;
  s.className = bad ? "error" : "";
}

function rate(x) { return x === undefined || x === null ? "–" : (x >= 100 ? x.toFixed(0) : x.toFixed(1)); }

// refresh reads the pipelines and redraws what shows them.
async function refresh() {
  let r;
  try { r = await api("GET", "/pipelines"); } catch (e) { setStatus("the host does not answer: " + e.message, true); return; }
  if (!r.ok) { setStatus((r.data && r.data.error) || ("HTTP " + r.status), true); return; }
  ui.pipelines = r.data.pipelines;
  setStatus("connected · " + ui.pipelines.length + " pipelines · " + new Date().toLocaleTimeString());
  drawTable();
  drawGraph();
  drawDetail();
}

// drawTable updates the pipelines' rows in place, so that a button under
// the pointer stays the same element across refreshes.
function drawTable() {
  const tbody = $("pipelines").tBodies[0];
  const rows = new Map([...tbody.rows].map((tr) => [tr.dataset.pipeline, tr]));
  const names = new Set(ui.pipelines.map((p) => p.name));
  for (const [name, tr] of rows) if (!names.has(name)) tr.remove();
  for (const p of ui.pipelines) {
    let tr = rows.get(p.name);
    if (!tr) {
      tr = el("tr", {"data-pipeline": p.name},
        el("td", {}, el("a", {href: "#detail", onclick: () => select(p.name)}, p.name)),
        el("td", {"data-field": "state"}),
        el("td", {class: "num", "data-field": "received-rate"}), el("td", {class: "num", "data-field": "acked-rate"}),
        el("td", {class: "num", "data-field": "backlog"}), el("td", {class: "num", "data-field": "in-flight"}),
        el("td", {class: "num", "data-field": "acked"}), el("td", {class: "num", "data-field": "dead-lettered"}),
        el("td", {class: "num", "data-field": "instances"}), el("td", {"data-field": "action"}));
    }
    tbody.append(tr); // in the files' order
    tr.className = p.name === ui.selected ? "selected" : "";
    const set = (field, text) => { const td = tr.querySelector(`td[data-field="${field}"]`); if (td.textContent !== text) td.textContent = text; };
    const stateCell = tr.querySelector('td[data-field="state"]');
    if (stateCell.dataset.state !== p.state) { stateCell.dataset.state = p.state; stateCell.replaceChildren(stateLabel(p.state)); }
    const up = p.instances.filter((i) => i.up).length;
    set("received-rate", rate(p.rates.received));
    set("acked-rate", rate(p.rates.acked));
    set("backlog", p.backlog === null ? "–" : String(p.backlog));
    set("in-flight", String(p.counts.in_flight));
    set("acked", String(p.counts.acked));
    set("dead-lettered", String(p.counts.dead_lettered));
    set("instances", p.instances.length ? up + "/" + p.instances.length : "in the host");
    const want = p.paused ? "resume" : "pause";
    const cell = tr.querySelector('td[data-field="action"]');
    const btn = cell.querySelector("button");
    if (!btn || btn.dataset.action !== want) {
      cell.replaceChildren(el("button", {type: "button", "data-action": want, "data-pipeline": p.name,
        onclick: (e) => { e.currentTarget.disabled = true; setPaused(p.name, !p.paused); }}, p.paused ? "Resume" : "Pause"));
    }
  }
}

// drawGraph lays the topics and pipelines out in columns: a topic no
// pipeline writes to first, each pipeline one column right of its
// furthest input, its outputs one column right of it.
function drawGraph() {
  const g = $("graph");
  g.replaceChildren();
  // One node per topic however the files write its name.
  const norm = (t) => t.includes("://") ? t : "persistent://" + (t.split("/").length === 3 ? t : "public/default/" + t);
  const pipes = ui.pipelines.map((p) => ({...p, inputs: p.inputs.map(norm), outputs: p.outputs.map(norm)}));
  const written = new Set();
  for (const p of pipes) for (const t of p.outputs) written.add(t);
  const level = new Map(); // node id -> column
  const topicId = (t) => "t:" + t;
  for (const p of pipes) for (const t of p.inputs) if (!written.has(t)) level.set(topicId(t), 0);
  // Settle the columns (a cycle stops at a bound).
  for (let round = 0; round < pipes.length + 2; round++) {
    for (const p of pipes) {
      let col = 1;
      for (const t of p.inputs) col = Math.max(col, (level.get(topicId(t)) || 0) + 1);
      level.set("p:" + p.name, Math.min(col, 2 * pipes.length + 1));
      for (const t of p.outputs) {
        const c = level.get("p:" + p.name) + 1;
        if (!level.has(topicId(t)) || (level.get(topicId(t)) < c && written.has(t) && !p.inputs.includes(t))) level.set(topicId(t), c);
      }
    }
  }
  const cols = new Map();
  for (const [id, c] of level) { if (!cols.has(c)) cols.set(c, []); cols.get(c).push(id); }
  const W = 230, H = 64, boxW = 190, boxH = 46;
  const pos = new Map();
  let maxRows = 1, maxCol = 0;
  for (const [c, ids] of cols) {
    ids.sort();
    ids.forEach((id, i) => pos.set(id, {x: 10 + c * W, y: 10 + i * H}));
    maxRows = Math.max(maxRows, ids.length);
    maxCol = Math.max(maxCol, c);
  }
  g.setAttribute("width", String(20 + (maxCol + 1) * W));
  g.setAttribute("height", String(20 + maxRows * H));
  const defs = svg("defs", {}, svg("marker", {id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse"},
    svg("path", {d: "M 0 0 L 10 5 L 0 10 z", class: "arrow"})));
  g.append(defs);
  const edge = (from, to) => {
    const a = pos.get(from), b = pos.get(to);
    if (!a || !b) return;
    const x1 = a.x + boxW, y1 = a.y + boxH / 2, x2 = b.x, y2 = b.y + boxH / 2;
    const mx = (x1 + x2) / 2;
    g.append(svg("path", {d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: "edge", "marker-end": "url(#arrow)"}));
  };
  for (const p of pipes) {
    for (const t of p.inputs) edge(topicId(t), "p:" + p.name);
    for (const t of p.outputs) edge("p:" + p.name, topicId(t));
  }
  const short = (t) => t.replace(/^persistent:\/\/public\/default\//, "");
  const clip = (s, n) => s.length > n ? s.slice(0, n - 1) + "…" : s;
  for (const [id, at] of pos) {
    if (id.startsWith("t:")) {
      const name = id.slice(2);
      const node = svg("g", {class: "topic", "data-topic": name}, svg("title", {}, name),
        svg("rect", {x: at.x, y: at.y, width: boxW, height: boxH, rx: 14}),
        svg("text", {x: at.x + 10, y: at.y + 27}, "topic " + clip(short(name), 22)));
      g.append(node);
      continue;
    }
    const p = pipes.find((q) => "p:" + q.name === id);
    const node = svg("g", {class: "pipe" + (p.name === ui.selected ? " selected" : ""), "data-pipeline": p.name, tabindex: "0", role: "button"},
      svg("title", {}, p.name + ": " + p.state),
      svg("rect", {x: at.x, y: at.y, width: boxW, height: boxH, rx: 3}),
      svg("text", {x: at.x + 8, y: at.y + 18}, clip(p.name, 24)),
      svg("text", {x: at.x + 8, y: at.y + 36, class: "state-" + p.state}, (SYMBOLS[p.state] || "•") + " " + p.state + " · " + rate(p.rates.acked) + "/s"));
    node.addEventListener("click", () => select(p.name));
    node.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") select(p.name); });
    g.append(node);
  }
}

function select(name) {
  if (ui.selected !== name) stopTap();
  ui.selected = name;
  drawTable();
  drawGraph();
  drawDetail();
}

function drawDetail() {
  const p = ui.pipelines.find((q) => q.name === ui.selected);
  $("detail").hidden = !p;
  if (!p) return;
  $("detail-title").replaceChildren("Pipeline " + p.name + " ", stateLabel(p.state));
  $("detail-reason").textContent = (p.reason ? p.reason + " · " : "") + "file " + p.file + " · " + p.inputs.join(", ") + " → " + (p.outputs.join(", ") || "no declared output");
  const ib = $("instances").tBodies[0];
  ib.replaceChildren();
  if (!p.instances.length) ib.append(el("tr", {}, el("td", {colspan: "7"}, "No plugin instances: steps alone, in the host's process.")));
  for (const i of p.instances) {
    ib.append(el("tr", {},
      el("td", {class: "num"}, String(i.instance)), el("td", {}, i.up ? "✔ up" : "✖ down"), el("td", {class: "num"}, i.pid ? String(i.pid) : "–"),
      el("td", {class: "num"}, String(i.batches)), el("td", {class: "num"}, String(i.restarts)), el("td", {class: "num"}, String(i.swaps)),
      el("td", {class: "mono"}, i.last_error || "")));
  }
  const rb = $("reasons").tBodies[0];
  rb.replaceChildren();
  if (!p.dead_letter_reasons.length) rb.append(el("tr", {}, el("td", {colspan: "3"}, "None.")));
  for (const r of p.dead_letter_reasons) {
    rb.append(el("tr", {}, el("td", {class: "mono"}, r.reason), el("td", {class: "num"}, String(r.count)), el("td", {}, new Date(r.last).toLocaleTimeString())));
  }
  $("tap-hint").textContent = p.tap
    ? "A few messages a second of what the pipeline takes in (with their outcome) and puts out, payloads cut short."
    : "This pipeline does not allow a tap: set tap: true on it in its file.";
  $("tap-toggle").disabled = !p.tap;
}

async function setPaused(name, paused) {
  setStatus((paused ? "pausing " : "resuming ") + name + "…");
  const r = await api("POST", "/pipelines/" + encodeURIComponent(name) + (paused ? "/pause" : "/resume"));
  if (!r.ok) { setStatus(((r.data && r.data.error) || ("HTTP " + r.status)), true); return; }
  await refresh();
  await loadFiles();
}

function stopTap() {
  if (ui.tap) { ui.tap.close(); ui.tap = null; }
  $("tap-toggle").textContent = "Start tap";
}

function toggleTap() {
  if (ui.tap) { stopTap(); return; }
  const name = ui.selected;
  let url = API + "/pipelines/" + encodeURIComponent(name) + "/tap?rate=5";
  if (ui.token) url += "&access_token=" + encodeURIComponent(ui.token);
  const es = new EventSource(url);
  ui.tap = es;
  $("tap-toggle").textContent = "Stop tap";
  $("tap").tBodies[0].replaceChildren();
  es.addEventListener("message", (ev) => {
    const e = JSON.parse(ev.data);
    const body = $("tap").tBodies[0];
    const payload = (e.encoding === "base64" ? "base64: " : "") + e.payload + (e.truncated ? " … (" + e.size + " bytes)" : "");
    body.prepend(el("tr", {"data-kind": e.kind},
      el("td", {}, new Date(e.time).toLocaleTimeString()), el("td", {}, e.kind === "input" ? "→ input" : "← output"),
      el("td", {class: "mono"}, e.topic), el("td", {class: "mono"}, e.key || ""), el("td", {class: "mono"}, e.trace_id || "–"),
      el("td", {}, e.outcome ? e.outcome + (e.reason ? ": " + e.reason : "") : ""), el("td", {class: "mono", "data-field": "payload"}, payload)));
    while (body.rows.length > 100) body.deleteRow(body.rows.length - 1);
  });
  es.addEventListener("error", () => { if (es.readyState === EventSource.CLOSED) stopTap(); });
}

let files = [];

async function loadFiles() {
  const r = await api("GET", "/files");
  if (!r.ok) return;
  files = r.data.files;
  const sel = $("file");
  const current = sel.value;
  sel.replaceChildren(...files.map((f) => el("option", {value: f.path}, f.path)));
  if (files.some((f) => f.path === current)) sel.value = current;
  showFile();
}

function showFile() {
  const f = files.find((x) => x.path === $("file").value);
  if (!f) return;
  $("content").value = f.content;
  $("file-note").textContent = f.writable ? "" : "(read-only: changes are refused)";
  ui.dryRunOf = null;
  $("apply").disabled = true;
  $("plan").replaceChildren();
}

function showPlan(r, applied) {
  const out = $("plan");
  out.replaceChildren();
  if (!r.ok) {
    out.append(el("p", {class: "error"}, "✖ " + ((r.data && r.data.error) || ("HTTP " + r.status))));
    if (r.data && r.data.problems) out.append(el("ul", {class: "problems"}, ...r.data.problems.map((p) => el("li", {}, p))));
    return false;
  }
  const plan = r.data;
  out.append(el("p", {class: "ok"}, applied ? "✔ Applied: the file is written and reloaded." : "What a reload would do (nothing has changed yet):"));
  const tb = el("tbody");
  for (const c of plan.pipelines) {
    tb.append(el("tr", {"data-pipeline": c.pipeline},
      el("td", {}, c.pipeline), el("td", {}, c.action), el("td", {}, c.effects.join(", ") || "–"),
      el("td", {class: "mono"}, c.fields.map((f) => f.path + " (" + f.reload + ")").join(", ") + (c.binary ? " handler binary" : ""))));
  }
  out.append(el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Pipeline"), el("th", {}, "Action"), el("th", {}, "Effects"), el("th", {}, "Fields"))), tb));
  if (plan.restart.length) {
    out.append(el("p", {class: "error"}, "✖ These settings take a restart, so applying is refused: " + plan.restart.map((f) => f.path).join(", ")));
    return false;
  }
  return true;
}

async function dryRun() {
  const content = $("content").value;
  const r = await api("POST", "/reload/dry-run", {file: $("file").value, content});
  const fine = showPlan(r, false);
  ui.dryRunOf = fine ? content : null;
  $("apply").disabled = !fine;
}

async function apply() {
  const content = $("content").value;
  if (content !== ui.dryRunOf) { $("apply").disabled = true; return; }
  $("apply").disabled = true;
  const r = await api("POST", "/reload", {file: $("file").value, content});
  showPlan(r, true);
  ui.dryRunOf = null;
  await refresh();
  if (r.ok) {
    const keep = $("plan").cloneNode(true);
    await loadFiles();
    $("plan").replaceWith(keep);
  }
}

function start() {
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    ui.token = $("token").value.trim();
    sessionStorage.setItem("streamrun-token", ui.token);
    $("token-form").hidden = true;
    refresh();
    loadFiles();
  });
  $("tap-toggle").addEventListener("click", toggleTap);
  $("dry-run").addEventListener("click", dryRun);
  $("apply").addEventListener("click", apply);
  $("revert").addEventListener("click", loadFiles);
  $("file").addEventListener("change", showFile);
  $("content").addEventListener("input", () => { $("apply").disabled = $("content").value !== ui.dryRunOf; });
  refresh();
  loadFiles();
  setInterval(refresh, 1000);
}

document.addEventListener("DOMContentLoaded", start);
