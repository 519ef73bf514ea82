// batch view: the live page of one or more batches (docs/view.md).
// Every text from a batch goes into the page as text (textContent), never as markup.
"use strict";

const TOKEN = document.querySelector('meta[name="batch-token"]').content;
const READ_ONLY = document.querySelector('meta[name="batch-read-only"]').content === "1";
const batches = [];  // per batch: {root, overview, cells: Map, models: []}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function api(path, params) {
  const query = new URLSearchParams(params || {});
  return fetch(`${path}?${query}`, { headers: { "X-Batch-Token": TOKEN } })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`${path}: ${r.status}`))));
}

function pct(value) { return value === null || value === undefined ? "—" : `${(value * 100).toFixed(1)}%`; }
function secs(value) {
  if (value === null || value === undefined) return "—";
  if (value < 60) return `${value.toFixed(1)} s`;
  const m = Math.floor(value / 60), s = Math.round(value % 60);
  if (m < 60) return `${m}m ${String(s).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}
// One letter a status, and none for a job not started: "P" is only ever a pass.
const CELL_TEXT = { passed: "P", failed: "F", error: "E", skipped: "S", running: "R", pending: "·" };
function cellKey(c) { return `${c.case}\u0000${c.model}\u0000${c.repeat}`; }

async function control(index, body, button) {
  if (button) button.disabled = true;
  try {
    const response = await fetch(`/api/control?batch=${index}`, {
      method: "POST",
      headers: { "X-Batch-Token": TOKEN, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const said = await response.json();
    const note = batches[index].root.querySelector(".control-note");
    note.textContent = said.message || said.error || "";
  } finally {
    if (button) button.disabled = false;
  }
}

function renderControls(index) {
  if (READ_ONLY) return el("p", { class: "note" }, "read-only view: no controls");
  const o = batches[index] && batches[index].overview;
  // Only what a driver can take: a finished batch (or one whose driver died) has none.
  if (o && !o.steerable) {
    return el("p", { class: "note controls-off" }, o.state === "running" || o.state === "stopping"
      ? "no driver is running this batch (it stopped without ending): nothing to steer; --resume goes on"
      : `this batch is ${o.state}: no driver is running it, so there is nothing to steer`);
  }
  const act = (action) => (event) => control(index, { action }, event.target);
  return el("div", { class: "controls" },
    el("button", { type: "button", "data-action": "pause", onclick: act("pause") }, "Pause"),
    el("button", { type: "button", "data-action": "continue", onclick: act("continue") }, "Continue"),
    el("button", { type: "button", "data-action": "stop", onclick: act("stop") }, "Stop"),
    el("span", { class: "control-note note" }));
}

function modelControls(index, row) {
  if (READ_ONLY || !batches[index].overview.steerable) return null;
  const skip = row.skipped_by_hand ? "unskip" : "skip";
  const input = el("input", { type: "number", min: "1", size: "3", "aria-label": `concurrency of ${row.model}` });
  return el("span", { class: "model-controls" },
    el("button", { type: "button", "data-action": skip, "data-model": row.model,
      onclick: (e) => control(index, { action: skip, model: row.model }, e.target) },
      skip === "skip" ? "Skip" : "Unskip"),
    input,
    el("button", { type: "button", "data-action": "concurrency", "data-model": row.model,
      onclick: (e) => control(index, { action: "concurrency", model: row.model,
        number: Number(input.value) }, e.target) }, "Set limit"));
}

function renderOverview(index) {
  const b = batches[index], o = b.overview;
  const head = b.root.querySelector(".head");
  head.replaceChildren(
    el("h2", {}, o.name),
    el("div", {},
      el("span", { class: "state", "data-state": o.state }, o.state),
      o.paused ? el("span", { class: "badge paused" }, "paused") : null,
      o.halt ? el("span", { class: "badge" }, `halted: ${o.halt}`) : null),
    el("div", { class: "bar" }, el("div", {})),
    el("div", { class: "progress" },
      `${o.done} of ${o.jobs} done — passed ${o.totals.passed}, failed ${o.totals.failed}, `
      + `error ${o.totals.error}, skipped ${o.totals.skipped}, running ${o.totals.running}`
      + (o.eta_seconds !== null ? ` — ETA ${secs(o.eta_seconds)}` : "")
      + (o.spent_usd !== null ? ` — spent $${o.spent_usd}` : "")
      + (o.projected_usd !== null ? `, projected $${o.projected_usd}` : "")));
  // The bar's width through the CSSOM: the policy allows no inline style attribute.
  head.querySelector(".bar > div").style.width = `${o.jobs ? (100 * o.done) / o.jobs : 0}%`;
  if (b.steerable !== o.steerable) {  // rebuilt only when it changes: a note typed in stays
    b.steerable = o.steerable;
    b.root.querySelector(".controls-box").replaceChildren(renderControls(index));
  }
  const models = el("table", { class: "models" },
    el("tr", {}, ...["Model", "Done", "Passed", "Failed", "Error", "Running", "Skipped",
      "Pending", "Adjusted (95% CI)", "Breaker", "Limit", ""].map((h) => el("th", {}, h))));
  for (const row of o.models) {
    const done = row.passed + row.failed + row.error;
    const rate = row.adjusted_pass_rate === null ? "—"
      : `${pct(row.adjusted_pass_rate)} (${pct(row.low)}–${pct(row.high)})`;
    models.append(el("tr", { "data-model": row.model },
      el("td", {}, row.model, row.skipped_by_hand ? el("span", { class: "badge" }, "skipped by hand") : null),
      ...[done, row.passed, row.failed, row.error, row.running, row.skipped, row.pending]
        .map((v) => el("td", { class: "num" }, v)),
      el("td", { class: "num" }, rate),
      el("td", {}, row.breaker),
      el("td", {}, row.limit ? `${row.limit.current} of ${row.limit.max}` : "—"),
      el("td", {}, modelControls(index, row))));
  }
  // Pools: limits shared with other sweeps (docs/policies.md, "Pools"), only when the sweep has any.
  const pools = (o.pools || []).length ? el("table", { class: "pools" },
    el("tr", {}, ...["Pool", "At once", "Rate", "Running", "Refused", "Sweeps"].map((h) => el("th", {}, h))))
    : null;
  for (const p of o.pools || []) {
    const most = (value, max, unit) => value === null ? "—"
      : `${Number(value.toPrecision(3))}${unit}${max !== null ? ` of ${Number(max.toPrecision(3))}${unit}` : ""}`;
    pools.append(el("tr", { "data-pool": p.pool },
      el("td", {}, p.pool),
      el("td", { class: "num" }, most(p.concurrency, p.max_concurrent, "")),
      el("td", { class: "num" }, most(p.rate, p.max_rate, "/s")),
      el("td", { class: "num" }, p.running === null ? "—" : p.running),
      el("td", { class: "num" }, p.refused === null ? "—" : p.refused),
      el("td", {}, p.sweeps.join(", "))));
  }
  b.root.querySelector(".models-box").replaceChildren(models, ...(pools ? [pools] : []));
  // A Repeat column only in a sweep with repeats.
  const running = el("table", {}, el("tr", {}, ...["Running", "Model", ...(o.repeats ? ["Repeat"] : []),
    "Step", "Elapsed", "Typical"].map((h) => el("th", {}, h))));
  for (const r of o.running) {
    running.append(el("tr", { class: r.stuck ? "stuck" : "" },
      el("td", {}, r.case), el("td", {}, r.model),
      o.repeats ? el("td", { class: "num" }, r.repeat) : null,
      el("td", {}, r.step || "—"),
      el("td", { class: "num" }, secs(r.elapsed)), el("td", { class: "num" }, secs(r.typical))));
  }
  const more = o.running_count > o.running.length ? el("p", { class: "note" },
    `and ${o.running_count - o.running.length} more running`) : null;
  b.root.querySelector(".running-box").replaceChildren(running, more || "");
  const failures = el("ul", { class: "failures" });
  for (const f of o.failures) {
    failures.append(el("li", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); openJob(index, f); } },
      `${f.case} × ${f.model}${f.repeat > 1 ? ` #${f.repeat}` : ""}`),
      `: ${f.status}${f.category ? ` (${f.category})` : ""}${f.reason ? ` — ${f.reason}` : ""}`));
  }
  b.root.querySelector(".failures-box").replaceChildren(
    o.failures.length ? failures : el("p", { class: "note" }, "none yet"));
  const log = el("ul", {});
  for (const c of o.controls) log.append(el("li", {}, `${c.source}: ${c.outcome}: ${c.message}`));
  b.root.querySelector(".controls-log").replaceChildren(log);
}

function renderRepeats(index, repeats) {
  const box = batches[index].root.querySelector(".repeats-box");
  if (!repeats) { box.replaceChildren(); return; }
  const table = el("table", {}, el("tr", {}, ...["Model", "k", "pass@1", "pass@k", "pass^k", "Flaky"]
    .map((h) => el("th", {}, h))));
  for (const [model, f] of Object.entries(repeats)) {
    table.append(el("tr", {}, el("td", {}, model), el("td", { class: "num" }, f.k),
      ...[f.pass_at_1, f.pass_at_k, f.pass_hat_k].map((x) => el("td", { class: "num" }, x ? pct(x.estimate) : "—")),
      el("td", { class: "num" }, f.flaky)));
  }
  box.replaceChildren(el("h3", {}, "Repeats"), table);
}

// The grid's samples per case x model, in case and model order.
function gridPairs(b) {
  const cases = [], models = [], byPair = new Map();
  for (const c of b.cells.values()) {
    if (!byPair.has(c.case)) { byPair.set(c.case, new Map()); cases.push(c.case); }
    if (!models.includes(c.model)) models.push(c.model);
    const row = byPair.get(c.case);
    if (!row.has(c.model)) row.set(c.model, []);
    row.get(c.model).push(c);
  }
  return { cases, models, byPair };
}

// One cell's look, from its samples (one, or a case's repeats).
function paintCell(td, samples) {
  td.removeAttribute("data-status");
  if (samples.length === 1) {
    const c = samples[0];
    td.className = `cell ${c.status}`;
    td.dataset.status = c.status;
    td.title = `${c.status}${c.reason ? `: ${c.reason}` : ""}`;
    td.textContent = CELL_TEXT[c.status] || "?";
  } else if (samples.length > 1) {
    const finished = samples.filter((c) => c.status === "passed" || c.status === "failed");
    const passed = finished.filter((c) => c.status === "passed").length;
    td.textContent = `${passed}/${finished.length}`;
    td.className = `cell ${passed === finished.length && finished.length ? "passed" : passed ? "error" : finished.length ? "failed" : "pending"}`;
    td.title = samples.map((c) => `#${c.repeat} ${c.status}`).join(", ");
  } else {
    td.className = "cell";
    td.textContent = "";
    td.title = "";
  }
}

// The grid is built again only when its cases or models change; otherwise each cell is
// repainted where it stands, so a click that lands while jobs finish is not lost on a cell
// replaced under the pointer. One click handler on the grid's box serves every cell.
function renderGrid(index) {
  const b = batches[index];
  const box = b.root.querySelector(".grid-box");
  const { cases, models, byPair } = gridPairs(b);
  const shape = JSON.stringify([cases, models, Boolean(b.folded)]);
  const samplesOf = (name, model) =>
    (byPair.get(name).get(model) || []).sort((x, y) => x.repeat - y.repeat);
  if (b.gridShape === shape && b.gridCells) {
    cases.forEach((name, row) => models.forEach((model, column) =>
      paintCell(b.gridCells[row][column], samplesOf(name, model))));
    return;
  }
  const table = el("table", { class: "grid" }, el("tr", {}, el("th", {}, "Case"), ...models.map((m) => el("th", {}, m))));
  b.gridCells = [];
  for (const name of cases) {
    const tr = el("tr", {}, el("td", {}, name));
    const row = [];
    for (const model of models) {
      const td = el("td", { class: "cell" });
      td.dataset.row = String(b.gridCells.length);
      td.dataset.column = String(row.length);
      paintCell(td, samplesOf(name, model));
      row.push(td);
      tr.append(td);
    }
    b.gridCells.push(row);
    table.append(tr);
  }
  b.gridShape = shape;
  b.gridCases = cases;
  b.gridModels = models;
  const note = b.folded ? el("p", { class: "note" },
    `${b.jobs} jobs: the grid shows only those that did not pass or are running; the models' rows hold the rest.`) : null;
  box.replaceChildren(note || "", table);
}

// A cell's job as it stands now: its one sample, or of a case's repeats the first that did
// not pass.
function gridClicked(index, event) {
  const b = batches[index];
  const td = event.target.closest("td.cell");
  if (!td || !b.gridCases) return;
  const { byPair } = gridPairs(b);
  const row = byPair.get(b.gridCases[Number(td.dataset.row)]);
  const samples = ((row && row.get(b.gridModels[Number(td.dataset.column)])) || [])
    .sort((x, y) => x.repeat - y.repeat);
  const pick = samples.length === 1 ? samples[0] : samples.find((c) => c.status !== "passed") || samples[0];
  if (pick) openJob(index, pick);
}

let openTimer = null;
async function openJob(index, cell) {
  const panel = document.getElementById("job");
  panel.hidden = false;
  clearTimeout(openTimer);
  const params = { batch: index, case: cell.case, model: cell.model, repeat: cell.repeat };
  document.getElementById("job-title").textContent =
    `${cell.case} × ${cell.model}${cell.repeat > 1 ? ` #${cell.repeat}` : ""}`;
  const load = async () => {
    try {
      const data = await api("/api/job", params);
      const j = data.job;
      document.getElementById("job-status").textContent =
        `${j.status}${j.category ? ` (${j.category})` : ""}${j.reason ? ` — ${j.reason}` : ""}; attempt ${j.attempts}; run dir ${j.run_dir || "—"}`;
      document.getElementById("job-record").textContent =
        data.record ? JSON.stringify(data.record, null, 2) : (data.problem || "no record yet");
      document.getElementById("job-log").textContent = data.log === null ? "no output.log" : data.log;
      document.getElementById("job-log-note").textContent = data.log_truncated ? "(its last 64 KiB)" : "";
      if (j.status === "running" && !panel.hidden) openTimer = setTimeout(load, 1500);
    } catch (error) {
      document.getElementById("job-status").textContent = String(error);
    }
  };
  await load();
}

async function loadBatch(index) {
  const data = await api("/api/state", { batch: index });
  const b = batches[index];
  b.overview = data.overview;
  b.cells = new Map(data.grid.cells.map((c) => [cellKey(c), c]));
  b.folded = data.grid.folded;
  b.jobs = data.grid.jobs;
  renderOverview(index);
  renderRepeats(index, data.repeats);
  renderGrid(index);
}

function follow() {
  const source = new EventSource(`/api/events?token=${encodeURIComponent(TOKEN)}`);
  const live = document.getElementById("live");
  source.onopen = () => { live.textContent = "live"; live.className = "live on"; };
  source.onerror = () => { live.textContent = "reconnecting…"; live.className = "live"; };
  source.onmessage = (message) => {
    const update = JSON.parse(message.data);
    const b = batches[update.batch];
    if (!b) return;
    b.overview = update.overview;
    for (const c of update.cells) b.cells.set(cellKey(c), c);
    renderOverview(update.batch);
    if (update.cells.length) renderGrid(update.batch);
  };
}

async function main() {
  document.getElementById("job-close").addEventListener("click", () => {
    document.getElementById("job").hidden = true;
    clearTimeout(openTimer);
  });
  const { batches: names } = await api("/api/batches");
  const root = document.getElementById("batches");
  names.forEach((name, index) => {
    const box = el("section", { class: "batch", "data-batch": String(index) },
      el("div", { class: "head" }), el("div", { class: "controls-box" }),
      el("h3", {}, "Models"), el("div", { class: "models-box" }),
      el("div", { class: "repeats-box" }),
      el("h3", {}, "Running"), el("div", { class: "running-box" }),
      el("h3", {}, "Latest failures"), el("div", { class: "failures-box" }),
      el("h3", {}, "Grid"), el("div", { class: "grid-box" }),
      el("h3", {}, "Controls taken"), el("div", { class: "controls-log" }));
    root.append(box);
    box.querySelector(".grid-box").addEventListener("click", (event) => gridClicked(index, event));
    batches.push({ root: box, overview: null, cells: new Map(), steerable: undefined });
  });
  await Promise.all(names.map((_, index) => loadBatch(index)));
  follow();
}

main();
