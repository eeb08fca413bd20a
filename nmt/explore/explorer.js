/* nmt explore: one sentence at a time, one panel per record set.
 * The data (script#nmt-data) is written by nmt/explore/payload.py: per sentence and panel, every
 * view's word-level matrix (T x S, row-major) as uint8 (weight * 255) in one base64 string.
 * Only the current sentence is decoded and drawn.
 * A panel entry may carry its own "src"/"tgt" words (nmt serve's free mode: each run's own
 * translation); pointing at a word then lights the same word in the other panels.
 * The page reads script#nmt-data when it has one; nmt serve calls
 * window.nmtExplorer.show(data, {decorate(panel, card), summary, hash}) instead. */
(() => {
  "use strict";
  let DATA, PANELS, SENTS, TEXTS, hooks = {};
  const $ = (id) => document.getElementById(id);
  const state = {
    list: [], // positions (into SENTS) that match the search
    pos: 0, // position of the sentence shown
    row: -1, col: -1, // highlighted target row / source column
    from: { src: "s", tgt: "s" }, // whose words row/col index: "s" the sentence's, "p<k>" panel k's own
    view: [], // view index shown by each panel
    diff: false, a: 0, b: 0,
  };
  let drawn = []; // the panels on screen: {title, vals, signed, cells, rowHeads, colHeads, srcSpans, src, tgt, keys}

  function setData(data) {
    const old = PANELS || [];
    DATA = data;
    PANELS = data.panels;
    SENTS = data.sentences;
    TEXTS = SENTS.map(sentenceText);
    state.list = SENTS.map((_, k) => k);
    const same = (p, q) => q && p.title === q.title && p.layers === q.layers && p.heads === q.heads && p.saved === q.saved;
    state.view = PANELS.map((p, k) => (same(p, old[k]) && state.view[k] < nViews(p) ? state.view[k] : p.default));
    state.a = Math.min(state.a, PANELS.length - 1);
    state.b = Math.min(Math.max(state.b, 1), PANELS.length - 1);
    state.row = state.col = -1;
    state.from = { src: "s", tgt: "s" };
    decoded.clear(); // matrices of the previous data
  }

  // Words of panel p of sentence s, and whose they are ("s": the sentence's, shared).
  function words(s, p) {
    const e = s.p[p] || {};
    return { src: e.src || s.src, tgt: e.tgt || s.tgt, keys: { src: e.src ? `p${p}` : "s", tgt: e.tgt ? `p${p}` : "s" } };
  }

  // ------------------------------------------------------------------------------ views
  const multi = (p) => p.layers * p.heads > 1;
  const nViews = (p) => (p.kind === "links" ? 1 : (p.saved ? 1 : 0) + (multi(p) ? 2 * p.layers * (p.heads + 1) : 0));
  const offset = (p) => (p.saved ? 1 : 0);

  function describe(p, v) { // view index -> {saved, reading, layer, slot}
    if (!multi(p) || (p.saved && v === 0)) return { saved: true };
    const k = v - offset(p), slot = k % (p.heads + 1), rl = Math.floor(k / (p.heads + 1));
    return { saved: false, reading: Math.floor(rl / p.layers), layer: rl % p.layers, slot };
  }
  const viewIndex = (p, r, l, slot) => offset(p) + (r * p.layers + l) * (p.heads + 1) + slot;

  function viewLabel(p, v) {
    const d = describe(p, v);
    if (!multi(p)) return "";
    if (d.saved) return "as saved: every layer and head averaged";
    const head = d.slot === 0 ? "head avg" : `head ${d.slot}`;
    return `layer ${d.layer + 1} · ${head} · ${DATA.readings[d.reading]}`;
  }

  function decode(b64) {
    const bin = atob(b64), out = new Uint8Array(bin.length);
    for (let k = 0; k < bin.length; k++) out[k] = bin.charCodeAt(k);
    return out;
  }

  const decoded = new Map(); // "pos/panel" -> Uint8Array of all views (current sentence only)
  function matrix(pos, p) { // -> {vals: Float32Array (T*S), aer} or {note}
    const s = SENTS[pos], entry = s.p[p], w = words(s, p), T = w.tgt.length, S = w.src.length;
    if (!entry || !entry.m) return { note: (entry && entry.note) || "no matrix" };
    const key = `${pos}/${p}`;
    if (!decoded.has(key)) decoded.set(key, decode(entry.m));
    const bytes = decoded.get(key), v = Math.min(state.view[p], nViews(PANELS[p]) - 1);
    const vals = new Float32Array(T * S);
    for (let k = 0; k < T * S; k++) vals[k] = bytes[v * T * S + k] / 255;
    return { vals, aer: entry.aer ? entry.aer[v] : null };
  }

  // ----------------------------------------------------------------------------- colours
  function mix(c0, c1, t) {
    return `rgb(${c0.map((c, k) => Math.round(c + (c1[k] - c) * t)).join(",")})`;
  }
  const WHITE = [255, 255, 255], MID = [107, 174, 214], DARK = [8, 48, 107];
  const RED = [178, 24, 43], BLUE = [33, 102, 172];
  function seq(v) { // one scale for every panel: 0 white .. 1 dark blue
    v = Math.max(0, Math.min(1, v));
    return v < 0.5 ? mix(WHITE, MID, v * 2) : mix(MID, DARK, (v - 0.5) * 2);
  }
  const div = (d) => (d >= 0 ? mix(WHITE, RED, Math.min(1, d)) : mix(WHITE, BLUE, Math.min(1, -d)));
  const colour = (v, signed) => (signed ? div(v) : seq(v));
  const ink = (v, signed) => (Math.abs(v) > (signed ? 0.6 : 0.55) ? "#fff" : "#111");

  // ------------------------------------------------------------------------------ drawing
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function drawSentence(s) {
    const box = $("sentence");
    box.replaceChildren();
    const line = (label, words, attr) => {
      const p = el("p", "line");
      p.append(el("b", "", label + " "));
      words.forEach((w, k) => {
        const span = el("span", "word", w);
        span.dataset[attr] = k;
        span.tabIndex = 0;
        p.append(span, " ");
      });
      box.append(p);
    };
    line(`#${s.i} source`, s.src, "col");
    if (s.tgt.length) line("target", s.tgt, "row");
  }

  function controls(p, card) {
    const spec = PANELS[p], d = describe(spec, state.view[p]);
    const bar = el("div", "controls");
    const layer = el("select", "layer");
    layer.setAttribute("aria-label", "layer");
    if (spec.saved) layer.append(new Option("all layers", "saved"));
    for (let l = 0; l < spec.layers; l++) layer.append(new Option(`layer ${l + 1}`, String(l)));
    layer.value = d.saved ? "saved" : String(d.layer);
    const head = el("select", "head");
    head.setAttribute("aria-label", "head");
    head.append(new Option("head avg", "0"));
    for (let h = 1; h <= spec.heads; h++) head.append(new Option(`head ${h}`, String(h)));
    head.value = d.saved ? "0" : String(d.slot);
    const reading = el("button", "reading", `reading: ${d.saved ? "as saved" : DATA.readings[d.reading]}`);
    reading.setAttribute("aria-pressed", String(!d.saved && d.reading === 1));
    reading.title = "naive: target word t read at the step that predicts it; shifted: at the step whose input is t (Chen et al. 2020)";
    head.disabled = reading.disabled = d.saved;
    const update = (r) => {
      if (layer.value === "saved") state.view[p] = 0;
      else state.view[p] = viewIndex(spec, r, Number(layer.value), Number(head.value));
      render();
    };
    const current = () => (d.saved ? 0 : d.reading); // leaving the saved view: naive first
    layer.onchange = () => update(current());
    head.onchange = () => update(current());
    reading.onclick = () => update(1 - current());
    bar.append(layer, head, reading);
    card.append(bar);
  }

  function drawMatrix(card, s, m, signed, gold) { // s: the words {src, tgt}
    const T = s.tgt.length, S = s.src.length;
    const shade = el("p", "src-shade"), srcSpans = [];
    s.src.forEach((w, i) => {
      const span = el("span", "word", w);
      span.dataset.col = i;
      srcSpans.push(span);
      shade.append(span, " ");
    });
    const table = el("table", "matrix"), head = el("tr"), colHeads = [], rowHeads = [], cells = [];
    head.append(el("th", "corner"));
    s.src.forEach((w, i) => {
      const th = el("th", "src");
      th.append(el("span", "", w));
      th.dataset.col = i;
      colHeads.push(th);
      head.append(th);
    });
    table.append(head);
    for (let j = 0; j < T; j++) {
      const tr = el("tr"), th = el("th", "tgt", s.tgt[j]), row = [];
      th.dataset.row = j;
      th.tabIndex = 0;
      tr.append(th);
      rowHeads.push(th);
      for (let i = 0; i < S; i++) {
        const v = m.vals[j * S + i], td = el("td");
        td.dataset.row = j;
        td.dataset.col = i;
        td.dataset.v = v.toFixed(3);
        td.style.background = colour(v, signed);
        const g = gold[`${i}-${j}`];
        if (g) td.classList.add(g === "s" ? "gold-s" : "gold-p");
        row.push(td);
        tr.append(td);
      }
      cells.push(row);
      table.append(tr);
    }
    card.append(shade, table);
    return { cells, rowHeads, colHeads, srcSpans };
  }

  function goldCells(s) {
    const gold = {};
    if (s.gold) {
      s.gold.s.forEach(([i, j]) => { gold[`${i}-${j}`] = "s"; });
      s.gold.p.forEach(([i, j]) => { gold[`${i}-${j}`] = "p"; });
    }
    return gold;
  }

  function card(title, extra) {
    const c = el("section", "panel");
    const h = el("h2", "panel-title", title);
    c.append(h);
    if (extra) c.dataset.kind = extra;
    return c;
  }

  function drawPanel(p, s, gold) {
    const spec = PANELS[p], m = matrix(state.pos, p), w = words(s, p);
    const label = viewLabel(spec, state.view[p]);
    const aer = m.aer === null || m.aer === undefined ? "" : ` — AER ${m.aer.toFixed(3)}`;
    const c = card(spec.title + aer, spec.kind);
    c.dataset.panel = p;
    if (hooks.decorate) hooks.decorate(p, c);
    if (label) c.append(el("p", "view", label));
    if (multi(spec) && !m.note) controls(p, c);
    if (m.note) {
      c.append(el("p", "note", m.note));
      return { el: c, title: spec.title };
    }
    if (w.keys.src !== "s" || w.keys.tgt !== "s") gold = {}; // gold belongs to the sentence's words
    return { el: c, title: spec.title, vals: m.vals, signed: false, ...w, ...drawMatrix(c, w, m, false, gold) };
  }

  function drawDiff(s, gold) {
    const a = matrix(state.pos, state.a), b = matrix(state.pos, state.b);
    const wa = words(s, state.a), wb = words(s, state.b);
    const title = `difference: ${PANELS[state.a].title} − ${PANELS[state.b].title}`;
    const c = card(title, "difference");
    c.dataset.panel = "diff";
    const other = wa.src.join(" ") !== wb.src.join(" ") || wa.tgt.join(" ") !== wb.tgt.join(" ");
    if (a.note || b.note || state.a === state.b || other) {
      c.append(el("p", "note", state.a === state.b ? "choose two different panels" : other ? "the two panels have different words" : "a panel has no matrix for this sentence"));
      return { el: c, title };
    }
    const vals = a.vals.map((v, k) => v - b.vals[k]);
    if (wa.keys.src !== "s" || wa.keys.tgt !== "s") gold = {};
    return { el: c, title, vals, signed: true, ...wa, ...drawMatrix(c, wa, { vals }, true, gold) };
  }

  function render() {
    const s = SENTS[state.pos], gold = goldCells(s);
    for (const key of decoded.keys()) if (!key.startsWith(`${state.pos}/`)) decoded.delete(key);
    drawSentence(s);
    drawn = PANELS.map((_, p) => drawPanel(p, s, gold));
    if (state.diff) drawn.unshift(drawDiff(s, gold));
    $("panels").replaceChildren(...drawn.map((d) => d.el));
    const k = state.list.indexOf(state.pos);
    $("position").textContent = `${k + 1} / ${state.list.length}` + (state.list.length < SENTS.length ? ` (of ${SENTS.length})` : "");
    $("sentence-list").value = String(state.pos);
    $("legend").className = state.diff ? "legend diverging" : "legend";
    const from = origin(state.from);
    if (!from || state.row >= from.tgt.length) state.row = -1;
    if (!from || state.col >= from.src.length) state.col = -1;
    highlight(state.row, state.col, from ? state.from : undefined);
  }

  // -------------------------------------------------------------------------- highlighting
  // The words behind keys {src, tgt} ("s": the sentence's, "p<k>": panel k's own), or null.
  function origin(keys) {
    const s = SENTS[state.pos], pick = (key, axis) => {
      if (key === "s") return s[axis];
      const d = drawn.find((x) => x.keys && x.keys[axis] === key);
      return d ? d[axis] : null;
    };
    const src = pick(keys.src, "src"), tgt = pick(keys.tgt, "tgt");
    return src && tgt ? { src, tgt } : null;
  }

  // Indices of `list` (words keyed `key`) that show word `at` of the pointed words: the same
  // index in the same words, the same word elsewhere.
  function matching(list, key, at, fromKey, fromList) {
    if (at < 0) return [];
    if (key === fromKey) return at < list.length ? [at] : [];
    return list.flatMap((w, k) => (w === fromList[at] ? [k] : []));
  }

  function highlight(row, col, fromKeys = { src: "s", tgt: "s" }) {
    const from = origin(fromKeys) || { src: [], tgt: [] };
    state.row = row;
    state.col = col;
    state.from = fromKeys;
    for (const d of drawn) {
      if (!d.cells) continue;
      const S = d.src.length;
      const rows = matching(d.tgt, d.keys.tgt, row, fromKeys.tgt, from.tgt);
      const cols = matching(d.src, d.keys.src, col, fromKeys.src, from.src);
      d.cells.forEach((r, j) => r.forEach((td, i) => {
        const inRow = rows.includes(j), inCol = cols.includes(i);
        td.classList.toggle("hl-row", inRow);
        td.classList.toggle("hl-col", inCol);
        td.classList.toggle("hl", inRow || inCol);
      }));
      d.rowHeads.forEach((th, j) => {
        th.classList.toggle("hl", rows.includes(j));
        const v = row < 0 && cols.length ? d.vals[j * S + cols[0]] : null;
        th.style.background = v === null ? "" : colour(v, d.signed);
        th.style.color = v === null ? "" : ink(v, d.signed);
      });
      d.colHeads.forEach((th, i) => th.classList.toggle("hl", cols.includes(i)));
      d.srcSpans.forEach((span, i) => {
        const v = rows.length ? d.vals[rows[0] * S + i] : null;
        span.style.background = v === null ? "" : colour(v, d.signed);
        span.style.color = v === null ? "" : ink(v, d.signed);
        span.classList.toggle("hl", cols.includes(i));
      });
    }
    const s = SENTS[state.pos];
    const rows = matching(s.tgt, "s", row, fromKeys.tgt, from.tgt);
    const cols = matching(s.src, "s", col, fromKeys.src, from.src);
    document.querySelectorAll("#sentence .word").forEach((w) => {
      const on = (w.dataset.row !== undefined && rows.includes(Number(w.dataset.row))) ||
        (w.dataset.col !== undefined && cols.includes(Number(w.dataset.col)));
      w.classList.toggle("hl", on);
    });
  }

  function pointAt(target) {
    const t = target.closest && target.closest("[data-row],[data-col]");
    if (!t) return;
    const row = t.dataset.row === undefined ? -1 : Number(t.dataset.row);
    const col = t.dataset.col === undefined ? -1 : Number(t.dataset.col);
    const card = t.closest(".panel"), d = card && drawn.find((x) => x.el === card && x.keys);
    const w = d || SENTS[state.pos];
    highlight(row, col, d ? d.keys : undefined);
    if (t.tagName === "TD" && d) {
      $("status").textContent = `${d.title}: ${w.tgt[row]} → ${w.src[col]} = ${t.dataset.v}`;
    } else {
      $("status").textContent = row >= 0 ? `target “${w.tgt[row]}”` : `source “${w.src[col]}”`;
    }
  }

  // ----------------------------------------------------------------------------- picking
  const sentenceText = (s) => `${s.src.join(" ")} ${s.tgt.join(" ")}`.toLowerCase();

  function fillList() {
    const sel = $("sentence-list");
    sel.replaceChildren(...state.list.map((pos) => {
      const s = SENTS[pos], text = s.src.join(" ");
      return new Option(`#${s.i} ${text.length > 70 ? text.slice(0, 69) + "…" : text}`, String(pos));
    }));
  }

  function go(pos) {
    state.pos = pos;
    if (history.replaceState && hooks.hash !== false) history.replaceState(null, "", `#${SENTS[pos].i}`);
    render();
  }

  function step(delta) {
    if (!state.list.length) return;
    const k = state.list.indexOf(state.pos);
    const next = k < 0 ? 0 : Math.max(0, Math.min(state.list.length - 1, k + delta));
    go(state.list[next]);
  }

  function search(query) {
    const q = query.trim().toLowerCase();
    state.list = SENTS.map((_, k) => k).filter((k) => !q || TEXTS[k].includes(q));
    fillList();
    if (state.list.length && !state.list.includes(state.pos)) go(state.list[0]);
    else render();
  }

  function setupDiff() {
    for (const id of ["diff-a", "diff-b"]) {
      $(id).replaceChildren(...PANELS.map((p, k) => new Option(p.title, String(k))));
    }
    $("diff-a").value = String(state.a);
    $("diff-b").value = String(state.b);
    $("diff-on").onchange = (e) => { state.diff = e.target.checked; render(); };
    $("diff-a").onchange = (e) => { state.a = Number(e.target.value); render(); };
    $("diff-b").onchange = (e) => { state.b = Number(e.target.value); render(); };
  }

  function onKey(e) {
    const tag = (e.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "select" || tag === "textarea" || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      step(e.key === "ArrowRight" ? 1 : -1);
      e.preventDefault();
    } else if ((e.key === "ArrowDown" || e.key === "ArrowUp") && e.target.matches("th.tgt")) {
      const sib = e.target.closest("tr")[e.key === "ArrowDown" ? "nextElementSibling" : "previousElementSibling"];
      const th = sib && sib.querySelector("th.tgt");
      if (th) th.focus();
      e.preventDefault();
    } else if (e.key === "Escape") {
      highlight(-1, -1);
    }
  }

  function bind() { // once: the listeners of the page's fixed elements
    $("prev").onclick = () => step(-1);
    $("next").onclick = () => step(1);
    $("search").oninput = (e) => search(e.target.value);
    $("sentence-list").onchange = (e) => go(Number(e.target.value));
    for (const id of ["panels", "sentence"]) {
      $(id).addEventListener("mouseover", (e) => pointAt(e.target));
      $(id).addEventListener("focusin", (e) => pointAt(e.target));
      $(id).addEventListener("mouseleave", () => { highlight(-1, -1); $("status").textContent = ""; });
    }
    document.addEventListener("keydown", onKey);
  }

  function show(data, options = {}) { // (re)draw the page for `data` (payload.py's document)
    hooks = options;
    setData(data);
    const gold = DATA.gold ? `; gold outlines: ${DATA.gold} (solid sure, dashed possible)` : "";
    $("summary").textContent = options.summary !== undefined ? options.summary :
      `${SENTS.length} sentences × ${PANELS.length} panels` +
      (DATA.split ? ` · split ${DATA.split}` : "") + gold +
      ". Hover or focus a word; ← → change sentence.";
    $("notes").replaceChildren(...(DATA.notes || []).map((n) => el("p", "note", n)));
    fillList();
    setupDiff();
    const fromHash = options.hash === false ? -1 : SENTS.findIndex((s) => `#${s.i}` === location.hash);
    if (!SENTS.length) {
      drawn = [];
      $("panels").replaceChildren(el("p", "note", "no sentences"));
      return;
    }
    go(fromHash < 0 ? 0 : fromHash);
  }

  bind();
  window.nmtExplorer = { show, highlight: (row, col) => highlight(row, col) };
  const inline = document.getElementById("nmt-data");
  if (inline) show(JSON.parse(inline.textContent));
})();
