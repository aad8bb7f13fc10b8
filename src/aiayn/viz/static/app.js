// The attention explorer page: posts the input to the JSON API (docs/explorer.md) and draws the
// returned weights as a grid of cells, tokens on both axes. Plain JS, no libraries.
"use strict";

const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const MODES = {
  translate: { label: "Sentence to translate", output: "Translation", field: "text" },
  generate: { label: "Prompt", output: "Continuation", field: "prompt" },
  encode: { label: "Text to encode", output: "Output", field: "text" },
};
const state = { info: null, data: null };
const $ = (id) => document.getElementById(id);

function colour(x) {  // x in [0, 1] -> an rgb() string on the viridis scale
  const t = Math.min(Math.max(x, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(t), VIRIDIS.length - 2);
  const f = t - i;
  const c = VIRIDIS[i].map((a, j) => Math.round(a + f * (VIRIDIS[i + 1][j] - a)));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

async function loadInfo() {
  const info = await (await fetch("/api/info")).json();
  state.info = info;
  const mode = MODES[info.endpoint];
  $("model-info").textContent = `model family: ${info.family} · at most ${info.max_chars} characters, ${info.max_len} tokens`;
  $("text-label").textContent = mode.label;
  $("output-label").textContent = mode.output;
  $("text").maxLength = info.max_chars;
  $("beam-box").hidden = info.endpoint !== "translate";
  if (info.beam) $("beam").value = Math.min(info.beam, info.max_beam);  // the folder's search
  $("new-box").hidden = info.endpoint !== "generate";
  if (info.example && !$("text").value) {  // open with an input from the training data, run
    $("text").value = info.example;
    $("input-form").requestSubmit();
  }
}

async function submit(event) {
  event.preventDefault();
  const info = state.info;
  const body = { [MODES[info.endpoint].field]: $("text").value };
  if (info.endpoint === "translate") body.beam = Number($("beam").value);
  if (info.endpoint === "generate") body.max_new_tokens = Number($("new-tokens").value);
  $("submit").disabled = true;
  showError("");
  try {
    const response = await fetch(`/api/${info.endpoint}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const data = await response.json();
    if (!response.ok) { showError(data.error || `error ${response.status}`); return; }
    state.data = data;
    showResult();
  } catch (err) {
    showError(`request failed: ${err}`);
  } finally {
    $("submit").disabled = false;
  }
}

function fillSelect(select, options, keep) {
  select.innerHTML = "";
  for (const [value, text] of options) select.add(new Option(text, value));
  if (keep !== undefined && options.some(([v]) => v === keep)) select.value = keep;
}

function showResult() {
  const data = state.data;
  $("output").textContent = data.output === null ? "(encoder: no output text)" : data.output;
  fillSelect($("kind"), data.kinds.map((k) => [k.kind, k.title]), $("kind").value);
  $("result").hidden = false;
  kindChanged();
}

function currentKind() {
  return state.data.kinds.find((k) => k.kind === $("kind").value);
}

function kindChanged() {
  const k = currentKind();
  const layers = Array.from({ length: k.n_layers }, (_, i) => [String(i), `${i + 1}`]);
  const heads = [["mean", "mean of heads"]].concat(
    Array.from({ length: k.n_heads }, (_, i) => [String(i), `${i + 1}`]));
  fillSelect($("layer"), layers, $("layer").value);
  fillSelect($("head"), heads, $("head").value || "0");
  render();
}

function matrix(layerWeights, head) {  // (H, T_q, T_k) -> (T_q, T_k)
  if (head !== "mean") return layerWeights[Number(head)];
  const h = layerWeights.length;
  return layerWeights[0].map((row, q) => row.map((_, k) =>
    layerWeights.reduce((s, w) => s + w[q][k], 0) / h));
}

function render() {
  const k = currentKind();
  const layer = Number($("layer").value);
  const head = $("head").value;
  const weights = state.data.attention[k.kind][layer];
  const m = matrix(weights, head);
  // One colour scale for every head of the layer (as in the figures), so heads compare.
  const vmax = Math.max(1e-9, ...weights.flat(2));
  const qTokens = state.data.tokens[k.query_axis];
  const kTokens = state.data.tokens[k.key_axis];
  const grid = $("heatmap");
  grid.innerHTML = "";
  // Cells as large as the window allows (beside the row labels, below the controls), between
  // 14 and 48 pixels.
  const labelWidth = 12 + 7 * Math.max(...qTokens.map((t) => t.length), 4);
  const wide = (grid.parentElement.clientWidth - labelWidth) / kTokens.length - 1;
  const tall = (window.innerHeight - 120) / qTokens.length - 1;
  const size = Math.max(14, Math.min(48, Math.floor(Math.min(wide, tall))));
  grid.style.setProperty("--cell", `${size}px`);
  grid.style.gridTemplateColumns = `auto repeat(${kTokens.length}, ${size}px)`;
  Object.assign(grid.dataset, { rows: qTokens.length, cols: kTokens.length, kind: k.kind,
    layer: layer, head: head });
  grid.appendChild(div("axis", `${k.query_axis} ↓ / ${k.key_axis} →`));
  kTokens.forEach((t, j) => grid.appendChild(div("label klabel", t, { k: j })));
  qTokens.forEach((t, i) => {
    grid.appendChild(div("label qlabel", t, { q: i }));
    m[i].forEach((w, j) => {
      const cell = div("cell", "", { q: i, k: j, w: w.toFixed(5) });
      cell.style.background = colour(w / vmax);
      cell.title = `${t} → ${kTokens[j]}: ${w.toFixed(3)}`;
      grid.appendChild(cell);
    });
  });
  $("vmax").textContent = vmax.toFixed(2);
  const headText = head === "mean" ? "mean of heads" : `head ${Number(head) + 1}`;
  $("caption").textContent = `${k.title}, layer ${layer + 1} of ${k.n_layers}, ${headText}: ` +
    `row = query (${k.query_axis}), column = key (${k.key_axis}). Hover a cell or token.`;
}

function div(cls, text, data = {}) {
  const el = document.createElement("div");
  el.className = cls;
  el.textContent = text;
  for (const [key, value] of Object.entries(data)) el.dataset[key] = value;
  return el;
}

function highlight(q, k) {  // the row of query q and the column of key k (either may be absent)
  for (const el of document.querySelectorAll("#heatmap .hl, #heatmap .focus")) {
    el.classList.remove("hl", "focus");
  }
  for (const el of document.querySelectorAll("#heatmap [data-q], #heatmap [data-k]")) {
    const inRow = q !== undefined && el.dataset.q === q;
    const inCol = k !== undefined && el.dataset.k === k;
    if (inRow || inCol) el.classList.add("hl");
    if (inRow && inCol) el.classList.add("focus");
  }
}

function init() {
  loadInfo().catch((err) => showError(`cannot reach the server: ${err}`));
  $("input-form").addEventListener("submit", submit);
  $("kind").addEventListener("change", kindChanged);
  $("layer").addEventListener("change", render);
  $("head").addEventListener("change", render);
  $("heatmap").addEventListener("mouseover", (e) => highlight(e.target.dataset.q, e.target.dataset.k));
  $("heatmap").addEventListener("mouseleave", () => highlight());
  window.addEventListener("resize", () => { if (state.data) render(); });
}

init();
