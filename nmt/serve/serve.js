/* nmt serve: the form. Asks POST /api/translate (each run's n-best) and POST /api/align (the
 * matrices, with views: the explorer's data), then draws the answer with nmt explore's renderer
 * (explorer.js: window.nmtExplorer.show), adding each run's translations above its panel. */
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  let last = null; // {source, target, beam, translations, alignment} of the sentence shown

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function say(text, error = false) {
    $("message").textContent = text;
    $("message").className = error ? "error" : "";
  }

  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    };
    const response = await fetch(path, init);
    let data = null;
    try { data = await response.json(); } catch (err) { data = null; }
    if (!response.ok) {
      const detail = (data && data.detail) || `HTTP ${response.status}`;
      const id = data && data.request_id ? ` (request ${data.request_id})` : "";
      throw new Error(response.status === 503 ? `${detail}` : `${detail}${id}`);
    }
    return data;
  }

  const fmt = (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)} M` : n >= 1e3 ? `${(n / 1e3).toFixed(0)} k` : String(n));

  function decorate(p, card) { // each run's translation, score and n-best above its matrix
    const spec = last.alignment.explorer.panels[p];
    if (spec.role !== "forward") return;
    const t = last.translations.find((x) => x.run === spec.run);
    const a = last.alignment.runs.find((x) => x.run === spec.run);
    if (!t) return;
    const box = el("div", "translation");
    const line = el("p");
    line.append(el("span", "text", t.text || "(empty)"), " ", el("span", "score", `score ${t.score.toFixed(4)} · beam ${t.beam}`));
    box.append(line);
    if (a && a.target_logprob !== null && a.target_logprob !== undefined) {
      box.append(el("p", "score", `forced on the target: log p(target | source) = ${a.target_logprob.toFixed(3)}`));
    }
    if (t.n_best.length > 1) {
      const ol = el("ol", "nbest");
      t.n_best.forEach((h) => ol.append(el("li", "", `${h.text}  (${h.score.toFixed(4)})`)));
      box.append(ol);
    }
    card.append(box);
  }

  function summary(al) {
    const mode = al.mode === "forced" ? "forced mode: every run aligned on the given target"
      : "free mode: each run aligned on its own translation";
    return `${mode} · ${al.method}${al.symmetrize ? ` · symmetrised (${al.symmetrize})` : ""}. ` +
      "Hover or focus a word: it lights up in every panel.";
  }

  async function align(shown = last) {
    const { source, target, beam, nBest } = shown;
    const sym = $("symmetrize").value || null;
    const al = await api("/api/align", {
      source, target, beam: target === null ? beam : null, n_best: target === null ? nBest : 1,
      method: $("method").value, symmetrize: $("sym-box").hidden ? null : sym, views: true,
    });
    shown.alignment = al;
    last = shown; // only a sentence whose alignment came back is the one the views redraw
    window.nmtExplorer.show(al.explorer, { decorate, hash: false, summary: summary(al) });
  }

  async function ask(event) {
    event.preventDefault();
    const source = $("source").value.trim();
    if (!source) { say("type a sentence first", true); return; }
    const target = $("target").value.trim() || null;
    const beam = $("beam").value ? Number($("beam").value) : null;
    const nBest = $("n-best").value ? Number($("n-best").value) : 1;
    $("go").disabled = true;
    say("translating…");
    try {
      const tr = await api("/api/translate", { source, beam, n_best: nBest });
      await align({ source, target, beam, nBest, translations: tr.runs });
      say("");
    } catch (err) {
      say(err.message, true);
    } finally {
      $("go").disabled = false;
    }
  }

  async function realign() {
    if (!last) return;
    say("aligning…");
    try { await align(); say(""); } catch (err) { say(err.message, true); }
  }

  async function init() {
    $("ask").addEventListener("submit", ask);
    $("method").addEventListener("change", realign);
    $("symmetrize").addEventListener("change", realign);
    $("source").addEventListener("keydown", (e) => { // Ctrl+Enter sends
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("ask").requestSubmit();
    });
    try {
      const info = await api("/api/runs");
      $("runs-line").textContent = `${info.runs.length} runs: ` + info.runs.map((r) =>
        `${r.index} ${r.name} (${r.family}, ${r.pair}, ${fmt(r.parameters)} parameters` +
        `${r.reverse ? `, reverse ${r.reverse}` : ""})`).join(" · ");
      $("sym-box").hidden = !info.runs.some((r) => r.reverse);
      document.body.dataset.ready = "1";
    } catch (err) {
      say(`cannot list the runs: ${err.message}`, true);
    }
  }

  init();
})();
