"use strict";
// The review page: every view is drawn from the embedded bundle (#review-data); nothing is fetched.
const D = JSON.parse(document.getElementById("review-data").textContent);
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const names = Object.keys(D.rankers);
const judgments = {}; // "qid\tcid" -> "duplicate" | "non-duplicate"
let rows = [], selected = 0;

function jaccard(a, b) { const A = new Set(a), B = new Set(b); const u = new Set([...A, ...B]).size;
  return u ? [...A].filter((x) => B.has(x)).length / u : 1; }
function rbo(a, b, p) { // truncated rank-biased overlap at the lists' common depth
  const k = Math.min(a.length, b.length); let s = 0; const A = new Set(), B = new Set(); let inter = 0;
  for (let d = 1; d <= k; d++) { const x = a[d - 1], y = b[d - 1];
    if (x === y) inter++; else { if (B.has(x)) inter++; if (A.has(y)) inter++; }
    A.add(x); B.add(y); s += Math.pow(p, d - 1) * inter / d; }
  return k ? (1 - p) * s / (1 - Math.pow(p, k)) : 1; }
const fmt = (v, n = 2) => (v === null || v === undefined) ? "–" : Number(v).toFixed(n);

function requests(r) { const q = r.requests_per_search; if (!q) return "–";
  return Object.entries(q).map(([k, v]) => `${fmt(v)} ${esc(k)}`).join(", "); }
function parityBadge(r) { const p = r.parity; if (!p) return r.computed_by ? `<span class="note">${esc(r.computed_by)}</span>` : "–";
  const ok = p.equal !== null && p.equal === p.queries;
  return `<span class="badge ${ok ? "ok" : "differ"}" data-equal="${p.equal === null ? "" : p.equal}" data-queries="${p.queries}" data-differ="${esc(p.differ.join(" "))}" title="${esc(p.rule || "")}">${esc(p.badge)}</span>`; }

function summary() {
  const m = D.metric_names.filter((x) => x !== "threshold");
  const engine = names.some((n) => D.rankers[n].parity || D.rankers[n].requests_per_search);
  let h = "<table id='summary-table'><thead><tr><th scope='col'>ranker</th>" + m.map((x) => `<th scope='col'>${esc(x)} [95% CI]</th>`).join("")
    + `<th scope='col'>p vs ${esc(D.baseline || "baseline")}</th><th scope='col'>ms / query p50</th><th scope='col'>p95</th><th scope='col'>mean (with setup)</th>`
    + (engine ? "<th scope='col'>requests / search</th><th scope='col'>engine parity</th>" : "") + "</tr></thead><tbody>";
  for (const n of names) { const r = D.rankers[n];
    h += `<tr data-ranker="${esc(n)}"><td>${esc(n)}</td>` + m.map((x) => `<td data-metric="${esc(x)}"><span class="v">${fmt(r.metrics[x])}</span> <span class="note">[${r.ci[x] ? fmt(r.ci[x][0]) + ", " + fmt(r.ci[x][1]) : "–"}]</span></td>`).join("")
      + `<td class="p">${r.p_vs_baseline === null ? "–" : r.p_vs_baseline}</td><td class="p50">${fmt(r.p50_ms, 3)}</td><td class="p95">${fmt(r.p95_ms, 3)}</td><td>${fmt(r.ms_per_query, 3)}</td>`
      + (engine ? `<td class="requests">${requests(r)}</td><td class="parity">${parityBadge(r)}</td>` : "") + "</tr>"; }
  $("summary").innerHTML = h + "</tbody></table>";
  $("methods").textContent = `Intervals: ${D.ci_method}. p: ${D.p_method}, against ${D.baseline || "no baseline"}. Latency: each query's ranking timed in this process (p50, p95; through the engine for a mode of es evaluate); the mean includes each ranker's setup (index, model load).`
    + (engine ? " Requests / search: HTTP requests this client sent per search, by target (the engine's own calls to the sidecar not counted). Engine parity: each query's ranked list from the engine against the in-process ranker the mode must equal, id by id in order." : "");
}

function contrastRows(a, b) {
  return D.queries.map((q) => { const x = q.by[a], y = q.by[b];
    const delta = x && y ? x.value - y.value : 0;
    return {q, a: x, b: y, delta, move: x && y && x.rank && y.rank ? y.rank - x.rank : null,
      jac: x && y ? jaccard(x.ranking, y.ranking) : null, rbo: x && y ? rbo(x.ranking, y.ranking, 0.9) : null}; })
    .sort((r, s) => Math.abs(s.delta) - Math.abs(r.delta) || r.q.id.localeCompare(s.q.id));
}

function rowHtml(r) {
  return `<tr data-qid="${esc(r.q.id)}" tabindex="-1">`
    + `<td class="text">${esc(r.q.text)} <span class="note">${esc(r.q.id)}</span></td><td>${r.a && r.a.rank ? r.a.rank : "–"}</td><td>${r.b && r.b.rank ? r.b.rank : "–"}</td>`
    + `<td class="${r.move > 0 ? "win" : r.move < 0 ? "loss" : ""}">${r.move === null ? "–" : (r.move > 0 ? "↑" + r.move : r.move < 0 ? "↓" + (-r.move) : "=")}</td>`
    + `<td class="delta ${r.delta > 0 ? "win" : r.delta < 0 ? "loss" : ""}">${fmt(r.delta)}</td><td>${fmt(r.jac)}</td><td>${fmt(r.rbo)}</td></tr>`;
}

// The rows of one pair of rankers are drawn once; a filter only hides rows, a move only moves the mark.
const drawn = {key: null, all: []};
function drawQueries() {
  const a = $("ranker-a").value, b = $("ranker-b").value, body = $("queries").querySelector("tbody");
  if (drawn.key !== a + "\u0000" + b) {
    drawn.all = contrastRows(a, b); body.innerHTML = drawn.all.map(rowHtml).join("");
    [...body.children].forEach((tr, i) => { drawn.all[i].tr = tr; }); drawn.key = a + "\u0000" + b;
  }
  const text = $("filter-text").value.toLowerCase(), changed = $("only-changed").checked, losses = $("only-losses").checked;
  rows = [];
  for (const r of drawn.all) {
    const shown = (!text || r.q.text.toLowerCase().includes(text) || r.q.id.toLowerCase().includes(text))
      && (!changed || Math.abs(r.delta) > 1e-9) && (!losses || r.delta < -1e-9);
    if (r.tr.hidden === shown) r.tr.hidden = !shown;
    if (shown) rows.push(r);
  }
  selected = Math.min(selected, Math.max(rows.length - 1, 0)); mark();
  $("query-count").textContent = `${rows.length} of ${D.queries.length} queries`;
}

function mark() {
  for (const tr of $("queries").querySelectorAll("tbody tr.sel")) tr.classList.remove("sel");
  if (rows[selected]) rows[selected].tr.classList.add("sel");
}

function explainCell(q, cid) {
  const e = (D.explain[q.id] || {})[cid];
  if (!e) return "";
  const parts = `first stage ${fmt(e.first_stage, 3)} (norm ${fmt(e.first_stage_norm, 3)}), bag of words ${fmt(e.bow, 3)}, neural ${fmt(e.neural, 3)}`;
  const sum = e.beta_bow === undefined ? "" : ` = ${fmt(e.beta_first_stage, 3)}·${fmt(e.first_stage_norm, 3)} + ${fmt(e.beta_bow, 3)}·${fmt(e.bow, 3)} + ${fmt(e.beta_neural, 3)}·${fmt(e.neural, 3)} = <span class="wsum">${fmt(e.beta_first_stage * e.first_stage_norm + e.beta_bow * e.bow + e.beta_neural * e.neural, 4)}</span>`;
  return ` <span class="note explain">${parts}; weighted sum${sum}; fused <span class="fused">${fmt(e.fused, 4)}</span></span>`;
}

function openQuery(i) {
  const r = rows[i]; if (!r) return; const q = r.q;
  let h = `<h3>${esc(q.text)} <span class="note">${esc(q.id)}</span></h3><div class="lists">`;
  for (const n of [$("ranker-a").value, $("ranker-b").value]) { const x = q.by[n]; if (!x) continue;
    h += `<section class="list" data-ranker="${esc(n)}"><h4>${esc(n)}</h4><ol>` + x.ranking.map((cid) => {
      const rel = q.relevant.includes(cid), judged = q.judged.includes(cid), mine = judgments[q.id + "\t" + cid];
      const buttons = judged ? "" : `<button type="button" data-judge="duplicate" data-cid="${esc(cid)}">duplicate</button><button type="button" data-judge="non-duplicate" data-cid="${esc(cid)}">not duplicate</button>${mine ? ` <span class="note">marked ${mine}</span>` : ""}`;
      return `<li class="${rel ? "rel" : ""}${mine === "duplicate" ? " judged-dup" : ""}" data-cid="${esc(cid)}">${esc(D.texts[cid] || cid)}${explainCell(q, cid)} ${buttons}</li>`; }).join("") + "</ol></section>"; }
  $("detail").innerHTML = h + "</div>"; $("detail").dataset.qid = q.id;
  $("detail").querySelectorAll("button[data-judge]").forEach((b) => b.addEventListener("click", () => {
    judgments[q.id + "\t" + b.dataset.cid] = b.dataset.judge; $("judged-count").textContent = `${Object.keys(judgments).length} judgments made`; openQuery(i); }));
}

function select(i) { selected = Math.max(0, Math.min(rows.length - 1, i)); mark();
  const tr = $("queries").querySelector("tr.sel"); if (tr) tr.scrollIntoView({block: "nearest"}); }

function downloadJudgments() {
  const clean = (s) => String(s).replace(/[\t\r\n]+/g, " ");
  const lines = Object.entries(judgments).map(([k, label]) => { const [qid, cid] = k.split("\t");
    const q = D.queries.find((x) => x.id === qid); return `${label}\t${clean(q.text)}\t${clean(D.texts[cid] || cid)}`; });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], {type: "text/tab-separated-values"}));
  a.download = "judgments.tsv"; document.body.appendChild(a); a.click(); a.remove();
}

function signatureView() {
  $("signature").innerHTML = "<table><thead><tr><th scope='col'>run</th><th scope='col'>query set</th><th scope='col'>judgments</th><th scope='col'>model manifest</th><th scope='col'>β</th><th scope='col'>command</th></tr></thead><tbody>"
    + D.runs.map((r) => `<tr><td>${esc(r.label)}</td><td><code>${esc(r.signature.queries.slice(0, 16))}</code></td><td><code>${esc(r.signature.judgments.slice(0, 16))}</code></td><td><code>${esc((r.signature.model || "–").slice(0, 16))}</code></td><td><code>${esc(r.signature.beta || "–")}</code></td><td class="text"><code>${esc(r.signature.command || "–")}</code></td></tr>`).join("") + "</tbody></table>";
  $("refusals").innerHTML = D.refusals.map((x) => `<p class="refusal" role="alert">${esc(x)}</p>`).join("")
    + (D.notices || []).map((x) => `<p class="notice">${esc(x)}</p>`).join("");
}

function init() {
  for (const id of ["ranker-a", "ranker-b"]) $(id).innerHTML = names.map((n) => `<option>${esc(n)}</option>`).join("");
  const others = names.filter((n) => n !== D.baseline);
  $("ranker-b").value = D.baseline || names[0]; $("ranker-a").value = others[others.length - 1] || names[0];
  summary(); signatureView(); drawQueries();
  for (const id of ["filter-text", "only-changed", "only-losses", "ranker-a", "ranker-b"]) $(id).addEventListener("input", () => { selected = 0; drawQueries(); });
  $("queries").querySelector("tbody").addEventListener("click", (e) => { const tr = e.target.closest("tr"); if (!tr) return;
    const i = rows.findIndex((r) => r.tr === tr); if (i < 0) return; select(i); openQuery(selected); });
  document.addEventListener("keydown", (e) => { if (e.target.matches("input, select, button")) return;
    if (e.key === "j" || e.key === "ArrowDown") { select(selected + 1); e.preventDefault(); }
    else if (e.key === "k" || e.key === "ArrowUp") { select(selected - 1); e.preventDefault(); }
    else if (e.key === "Enter") { openQuery(selected); } });
  $("download").addEventListener("click", downloadJudgments);
  document.body.dataset.ready = "1";
}
init();
