// kernelsweep results site: kernel pages (every series' history), the compare view and the lineage view.
// Data files are JSON handed to one call (kernelsweepData / kernelsweepSeries / kernelsweepLineage) and
// loaded by <script>: a page opened from file:// may not fetch() its neighbours, but it may load scripts.
// A kernel's file holds its series and steps; the points of each chunk of neighbouring series (a page of
// charts) are a file, loaded when one of its charts is drawn: a page opens in about the same time
// whatever the length of the history or the number of series.
"use strict";

const KS = { data: null, lineage: null, shown: 0, drawing: 0, points: {} };
const PAGE = 24; // charts drawn at a time: a kernel may have hundreds of series
const FILTERS = ["shape", "dtype", "platform", "lnc", "toolchain"];

function kernelsweepData(d) { KS.data = d; }
function kernelsweepLineage(d) { KS.lineage = d; }
function kernelsweepSeries(chunk) { for (const d of chunk) KS.points[d.id] = d; }

function points(list) { // the points of the series in `list`, a chunk of neighbouring series a file, each loaded once
  const chunks = new Set(list.filter((s) => !KS.points[s.id]).map((s) => Math.floor(s.id / KS.data.chunk)));
  return Promise.all([...chunks].map((c) => load(`series/${KS.data.slug}-${c}.js`)));
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function load(src) {
  return new Promise((resolve, reject) => {
    const s = el("script", { src });
    s.onload = resolve;
    s.onerror = () => reject(new Error("cannot load " + src));
    document.head.append(s);
  });
}

function params() { return new URLSearchParams(location.search); }
function day(ms) { return new Date(ms).toISOString().slice(0, 10); }
function when(ms) { return new Date(ms).toISOString().slice(0, 16).replace("T", " "); }
function us(v) { return v == null ? "-" : v.toPrecision(5) + " us"; }
function pct(v) { return (v > 0 ? "+" : "") + v + "%"; }
function stepText(s) { return `${s.night}: ${pct(s.change)} [${pct(s.low)}, ${pct(s.high)}] ${s.direction}; cause: ${s.cause}; ${s.state}${s.note ? " (" + s.note + ")" : ""}`; }
function stepClass(s) { return s.direction === "faster" ? "faster" : s.state; }
function lineageHref(series, i) { return `lineage.html?k=${encodeURIComponent(KS.data.slug)}&s=${series.id}&i=${i}`; }

// ---- kernel page ----------------------------------------------------------------------------------

function kernelPage() {
  const d = KS.data;
  const bar = document.getElementById("filters");
  for (const f of FILTERS) {
    const values = [...new Set(d.series.map((s) => s[f]))].sort((a, b) => String(a).localeCompare(String(b), undefined, { numeric: true }));
    const select = el("select", { id: "f-" + f, "data-filter": f }, el("option", { value: "" }, "all"));
    for (const v of values) select.append(el("option", { value: v }, v === "" ? "(default)" : v));
    select.disabled = values.length < 2;
    select.onchange = redraw;
    bar.append(el("label", {}, f + " ", select));
  }
  document.getElementById("more").onclick = () => drawMore(KS.drawing);
  const wanted = /^#s(\d+)$/.exec(location.hash);
  if (wanted) { // from the overview's regression: that series alone
    const s = d.series[+wanted[1]];
    if (s) for (const f of ["shape", "dtype", "platform", "lnc", "toolchain"]) document.getElementById("f-" + f).value = s[f];
  }
  redraw();
}

function chosen() {
  const want = Object.fromEntries(FILTERS.map((f) => [f, document.getElementById("f-" + f).value]));
  return KS.data.series.filter((s) => FILTERS.every((f) => want[f] === "" || String(s[f]) === want[f]));
}

function redraw() {
  document.getElementById("charts").replaceChildren();
  KS.shown = 0;
  drawMore(++KS.drawing);
}

async function drawMore(drawing) {
  const list = chosen();
  const next = list.slice(KS.shown, KS.shown + PAGE);
  KS.shown += next.length;
  await points(next);
  if (drawing !== KS.drawing) return; // the filters changed while the points loaded
  for (const s of next) document.getElementById("charts").append(seriesChart(s, KS.points[s.id]));
  document.getElementById("count").textContent = `${Math.min(KS.shown, list.length)} of ${list.length} series shown (${KS.data.series.length} in all)`;
  document.getElementById("more").hidden = KS.shown >= list.length;
}

function seriesChart(s, p) {
  const box = el("section", { class: "series", id: "s" + s.id, "data-series": s.id });
  box.append(el("h3", {}, s.label));
  if (s.steps.length) {
    const ul = el("ul", { class: "steps" });
    for (const st of s.steps) ul.append(el("li", { class: "step " + stepClass(st) }, stepText(st)));
    box.append(ul);
  }
  const plot = el("div", { class: "plot" });
  const tip = el("div", { class: "tip", hidden: "" });
  box.append(plot, tip);
  const t = p.t.map((ms) => ms / 1000);
  let down = null;
  const opts = {
    width: Math.min(1100, document.body.clientWidth - 40), height: 240,
    scales: { x: { time: true } },
    legend: { show: false },
    cursor: { drag: { x: true, y: false }, points: { size: 8 } },
    series: [
      {},
      { label: "median", stroke: "#1f77b4", width: 1.5, points: { show: p.t.length <= 400, size: 4 } },
      { label: "low", stroke: "rgba(0,0,0,0)", points: { show: false } },
      { label: "high", stroke: "rgba(0,0,0,0)", points: { show: false } },
    ],
    bands: [{ series: [3, 2], fill: "rgba(31,119,180,0.18)" }],
    axes: [{}, { label: "us", size: 70 }],
    hooks: {
      draw: [(u) => markSteps(u, s, p)],
      setCursor: [(u) => showTip(u, p, tip)],
      ready: [(u) => {
        u.over.addEventListener("mousedown", (e) => { down = e.clientX; });
        u.over.addEventListener("click", (e) => { // a drag zooms; a click opens the point's lineage
          if (down !== null && Math.abs(e.clientX - down) > 3) return;
          const i = u.cursor.idx;
          if (i != null) location.href = lineageHref(s, i);
        });
      }],
    },
  };
  box.chart = new uPlot(opts, [t, p.m, p.lo, p.hi], plot);
  return box;
}

function markSteps(u, s, p) {
  for (const old of u.over.querySelectorAll(".step-marker")) old.remove();
  for (const st of s.steps) {
    const x = u.valToPos(p.t[st.at] / 1000, "x");
    if (!(x >= 0 && x <= u.over.clientWidth)) continue;
    const mark = el("div", { class: "step-marker " + stepClass(st), title: stepText(st), "data-cause": st.cause, "data-night": st.night });
    mark.style.left = x + "px";
    mark.append(el("span", {}, `${pct(st.change)} ${st.cause}`));
    u.over.append(mark);
  }
}

function showTip(u, p, tip) {
  const i = u.cursor.idx;
  if (i == null) { tip.hidden = true; return; }
  const run = KS.data.runs[p.run[i]] || "";
  tip.textContent = `${when(p.t[i])}  median ${us(p.m[i])}  95% interval [${us(p.lo[i])}, ${us(p.hi[i])}]  run ${run.slice(0, 8)}  (click: lineage)`;
  tip.hidden = false;
}

// ---- compare view ---------------------------------------------------------------------------------

async function comparePage() {
  const q = params();
  const kernels = JSON.parse(document.getElementById("kernels").textContent);
  const pick = document.getElementById("kernel");
  for (const k of kernels) pick.append(el("option", { value: k.slug }, k.kernel));
  pick.value = q.get("k") || (kernels[0] && kernels[0].slug);
  pick.onchange = () => { location.search = "?k=" + encodeURIComponent(pick.value); };
  if (!pick.value) return;
  await load(`kernel-${pick.value}.js`);
  const d = KS.data;
  await points(d.series);
  document.getElementById("none").hidden = d.series.some((s) => KS.points[s.id].t.length);
  const first = new Map(); // run -> when its first point of this kernel was measured
  for (const p of Object.values(KS.points)) p.run.forEach((r, i) => { if (!first.has(r) || p.t[i] < first.get(r)) first.set(r, p.t[i]); });
  const runs = [...first.keys()].sort((a, b) => first.get(b) - first.get(a));
  for (const id of ["a", "b"]) {
    const sel = document.getElementById(id);
    for (const r of runs) sel.append(el("option", { value: r }, `${day(first.get(r))} ${d.runs[r].slice(0, 8)}`));
    sel.onchange = () => compareTable(+document.getElementById("a").value, +document.getElementById("b").value);
  }
  document.getElementById("a").value = q.has("a") ? runs.find((r) => d.runs[r].startsWith(q.get("a"))) : runs[1] ?? runs[0];
  document.getElementById("b").value = q.has("b") ? runs.find((r) => d.runs[r].startsWith(q.get("b"))) : runs[0];
  compareTable(+document.getElementById("a").value, +document.getElementById("b").value);
}

function compareTable(a, b) {
  const body = document.getElementById("rows");
  body.replaceChildren();
  for (const s of KS.data.series) {
    const p = KS.points[s.id];
    const i = p.run.indexOf(a), j = p.run.indexOf(b);
    if (i < 0 || j < 0) continue;
    const ratio = p.m[j] / p.m[i];
    const apart = p.lo[j] != null && p.hi[i] != null && p.lo[j] > p.hi[i] ? "slower" : p.hi[j] != null && p.lo[i] != null && p.hi[j] < p.lo[i] ? "faster" : "overlap";
    body.append(el("tr", { class: apart },
      el("td", {}, s.label),
      el("td", { class: "num" }, `${us(p.m[i])} [${us(p.lo[i])}, ${us(p.hi[i])}]`),
      el("td", { class: "num" }, `${us(p.m[j])} [${us(p.lo[j])}, ${us(p.hi[j])}]`),
      el("td", { class: "num" }, ratio.toFixed(4)),
      el("td", {}, apart),
      el("td", {}, el("a", { href: lineageHref(s, i) }, "A"), " ", el("a", { href: lineageHref(s, j) }, "B"))));
  }
}

// ---- lineage view ---------------------------------------------------------------------------------

async function lineagePage() {
  const q = params();
  const slug = q.get("k"), n = +q.get("s"), i = +q.get("i");
  const box = document.getElementById("lineage");
  try {
    await load(`kernel-${slug}.js`);
    await Promise.all([points([KS.data.series[n]]), load(`lineage/${slug}-${n}.js`)]);
  } catch (e) { box.textContent = String(e); return; }
  const s = KS.data.series[n], p = KS.points[n];
  const row = {}; // the point's value of each column (columns hold distinct values and each point's code)
  for (const [k, col] of Object.entries(KS.lineage.columns)) if (col.codes[i] >= 0) row[k] = col.values[col.codes[i]];
  document.getElementById("title").textContent = `${KS.data.kernel} ${s.label}: ${when(p.t[i])}`;
  document.getElementById("back").href = `kernel-${slug}.html#s${n}`;
  const rows = [
    ["row id", row.row_id], ["run date", row.run_date], ["status", row.status],
    ["median", `${us(p.m[i])} [${us(p.lo[i])}, ${us(p.hi[i])}] (95% interval from the repeats)`],
    ["simulated", row.is_simulation ? "yes: not a hardware measurement" : "no"],
  ];
  const table = el("table", { class: "lineage" });
  for (const [k, v] of rows) table.append(el("tr", {}, el("th", {}, k), el("td", {}, v == null ? "-" : String(v))));
  const run = row.flow_run_id || KS.data.runs[p.run[i]];
  const prefect = KS.data.prefect_ui && run ? el("a", { href: `${KS.data.prefect_ui.replace(/\/$/, "")}/runs/flow-run/${run}`, class: "flow-run" }, run) : run || "-";
  table.append(el("tr", {}, el("th", {}, "Prefect flow run"), el("td", {}, prefect)));
  const artifacts = [["kernel source", row.kernel_source_uri], ["IR", row.ir_uri], ["NEFF", row.neff_uri], ["NTFF", row.ntff_uri], ["profile", row.profile_uri],
    ...(row.inputs || []).map((x) => ["input " + x.name, x.uri])];
  for (const [k, uri] of artifacts) table.append(el("tr", { class: "artifact" }, el("th", {}, k), el("td", {}, uri ? artifactLink(uri) : "-")));
  for (const k of ["compiler_version", "runtime_version", "profiler_version", "nki_version", "instance_type", "host"]) {
    if (row[k]) table.append(el("tr", {}, el("th", {}, k.replace("_", " ")), el("td", {}, row[k])));
  }
  box.replaceChildren(table, el("p", {}, "Fetch its artifacts: ", el("code", {}, `kernelsweep lineage ${row.row_id || ""}`)));
}

function artifactLink(uri) {
  return /^(https?|file):/.test(uri) ? el("a", { href: uri }, uri) : el("code", {}, uri);
}
