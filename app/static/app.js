// The "try it" page: languages (source "auto" by default, swap when the reverse pair is served), POST /translate
// with {"stream": true} read as server-sent events, and a file form (files.js).
import { Messages, isEventStream, langName, readEvents } from "/static/events.js";
import { setupFiles } from "/static/files.js";

const $ = (id) => document.getElementById(id);
const form = $("form"), src = $("src"), tgt = $("tgt"), swap = $("swap"), detectedLine = $("detected");
const source = $("source"), output = $("output");
const beam = $("beam"), alts = $("alts"), maxnew = $("maxnew");
const go = $("go"), stop = $("stop"), copy = $("copy");
const details = $("details"), altsBox = $("alts-box"), altsList = $("alternatives");
const messages = new Messages($("error"), $("status"));
const served = new Map(); // source code -> Set of its targets
const names = new Map(); // code -> the server's name for it
let detected = null; // {language, confidence, target} of the last "auto" translation
let controller = null;
window.__tokenEvents = 0; // token events rendered by the last translation (read by the browser tests)

const nameOf = (code) => names.get(code) || langName(code);
const sourcesInto = (target) => [...served].filter(([, targets]) => targets.has(target)).map(([s]) => s);
const allTargets = () => [...new Set([...served.values()].flatMap((t) => [...t]))].sort();

function option(code, label) {
  const opt = new Option(label, code);
  opt.dataset.code = code;
  return opt;
}

// The target list for the chosen source (every target for "auto"), keeping the chosen target when it stays valid.
function fillTargets() {
  const keep = tgt.value;
  const targets = src.value === "auto" ? allTargets() : [...(served.get(src.value) || [])].sort();
  tgt.replaceChildren(...targets.map((t) => option(t, nameOf(t))));
  if (targets.includes(keep)) tgt.value = keep;
  else if (targets.length) tgt.value = targets.find((t) => t !== "en") || targets[0]; // the page is in English
  if (!targets.length) tgt.add(new Option("No models loaded", ""));
}

// The source a swap would make the target: the chosen one, or the one detected for this target.
function knownSource() {
  if (src.value !== "auto") return src.value;
  return detected && detected.target === tgt.value ? detected.language : null;
}

function updateSwap() {
  const from = knownSource();
  const ok = Boolean(from && tgt.value && served.get(tgt.value) && served.get(tgt.value).has(from));
  swap.disabled = !ok;
  swap.title = ok ? `Translate from ${nameOf(tgt.value)} into ${nameOf(from)}` : "The reverse pair is not served";
}

function showDetected(found, target) {
  detected = found ? { ...found, target } : null;
  if (!found) {
    detectedLine.textContent = "";
  } else if (sourcesInto(target).length === 1) {
    detectedLine.textContent = `From ${nameOf(found.language)}: the only language translated into ${nameOf(target)} here`;
  } else {
    detectedLine.textContent = `Detected: ${nameOf(found.language)} (${Math.round(found.confidence)}%)`;
  }
  updateSwap();
}

function languagesChanged() {
  detected = null;
  detectedLine.textContent = "";
  messages.clear();
  updateSwap();
}

async function loadLanguages() {
  try {
    const r = await fetch("/languages");
    if (!r.ok) return messages.failWith(r);
    for (const lang of await r.json()) {
      names.set(lang.code, lang.name);
      if (lang.targets.length) served.set(lang.code, new Set(lang.targets));
    }
    src.append(...[...served.keys()].sort().map((s) => option(s, nameOf(s))));
    fillTargets();
    updateSwap();
  } catch (e) {
    tgt.replaceChildren(new Option("Unavailable", ""));
    messages.fail(`Could not load the language list: ${e.message}.`);
  }
}

async function loadInfo() {
  try {
    const info = await (await fetch("/info")).json();
    const lim = info.limits || {};
    if (lim.max_beam_size) {
      beam.max = lim.max_beam_size;
      alts.max = lim.max_beam_size - 1;
    }
    if (lim.max_new_tokens) maxnew.max = lim.max_new_tokens;
    const models = info.models || [];
    const listed = models.map((m) => `${m.name}${m.builtin ? " (built-in)" : ""} on ${m.device}, ${m.dtype}`);
    if (listed.length) $("server").textContent = `mt-server ${info.version} serves ${listed.join("; ")}.`;
    $("demo").hidden = !models.some((m) => m.builtin);
    return info;
  } catch (_) {
    return {}; // the page works without /info
  }
}

function int(input) {
  const n = parseInt(input.value, 10);
  return Number.isFinite(n) ? n : null;
}

function setBusy(busy) {
  output.setAttribute("aria-busy", String(busy));
  stop.disabled = !busy;
  go.textContent = busy ? "Translating…" : "Translate";
  copy.disabled = busy || !output.textContent;
}

const fmt = (ms) => (ms == null ? "–" : ms < 10 ? ms.toFixed(1) : Math.round(ms).toString());

// The translation with its low-confidence sentences marked (details.sentences' `low`, or the whole text's).
function markLow(d) {
  const whole = output.textContent;
  const low = d.sentences ? d.sentences.filter((s) => s.low) : d.low_confidence ? [{ text: whole, confidence: d.confidence }] : [];
  const parts = [];
  let at = 0;
  for (const s of low) {
    const i = s.text ? whole.indexOf(s.text, at) : -1;
    if (i < 0) continue;
    const mark = document.createElement("mark");
    mark.className = "low-confidence";
    mark.title = `Confidence ${s.confidence.toFixed(2)}: worth a review`;
    mark.textContent = s.text;
    parts.push(whole.slice(at, i), mark);
    at = i + s.text.length;
  }
  if (parts.length) output.replaceChildren(...parts, whole.slice(at));
}

function showDone(body, started, firstAt, target) {
  const d = body.details || {};
  markLow(d);
  const seconds = (d.total_ms || 0) / 1000;
  const rate = seconds > 0 ? d.generated_tokens / seconds : 0;
  const rows = [
    ["Model", d.model],
    ["Tokens", `${d.input_tokens} in, ${d.generated_tokens} out (${d.finish_reason})`],
    ["Latency", `${fmt(d.total_ms)} ms on the server (queue ${fmt(d.queue_ms)} ms), ${fmt(performance.now() - started)} ms here`],
    ["Speed", `${rate ? rate.toFixed(1) : "–"} tokens/s`],
  ];
  if (firstAt) rows.push(["First token", `${fmt(firstAt - started)} ms`]);
  if (d.confidence != null) {
    const low = d.sentences ? d.sentences.filter((s) => s.low).length : Number(Boolean(d.low_confidence));
    const of = d.sentences ? d.sentences.length : 1;
    rows.push(["Confidence", `${d.confidence.toFixed(2)}${low ? ` (${low} of ${of} sentences marked for review)` : ""}`]);
  }
  if (d.glossary) {
    const terms = d.glossary.map((e) => `${e.source} → ${e.target} ${e.applied ? "✓" : "✗ (not in the output)"}`);
    rows.push(["Glossary", terms.length ? terms.join("; ") : "no term matched"]);
  }
  details.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = k;
    dd.textContent = v;
    details.append(dt, dd);
  }
  details.hidden = false;
  altsList.replaceChildren(...(body.alternatives || []).map((alt) => {
    const li = document.createElement("li");
    li.textContent = alt;
    return li;
  }));
  altsBox.hidden = !altsList.children.length;
  if (body.detectedLanguage) showDetected(body.detectedLanguage, target);
  messages.say(`Done: ${d.generated_tokens} tokens in ${fmt(d.total_ms)} ms, ${rate.toFixed(1)} tokens/s.`);
}

// The pasted terms as TSV: "source<TAB>target" lines as they are, "source = target" lines converted.
function glossaryTsv(text) {
  return text
    .split("\n")
    .map((line) => (line.includes("\t") || !line.includes(" = ") ? line : line.replace(" = ", "\t")))
    .filter((line) => line.trim())
    .join("\n");
}

function request(override) {
  const req = {
    q: source.value,
    source: src.value || "auto",
    target: tgt.value,
    alternatives: Math.max(0, int(alts) || 0),
    parameters: { beam_size: Math.max(1, int(beam) || 1) },
    ...override,
    stream: true,
  };
  if (int(maxnew)) req.parameters.max_new_tokens = int(maxnew);
  const terms = glossaryTsv($("glossary").value);
  if (terms && !("glossary" in override)) req.glossary = terms;
  return req;
}

// Translate the form's text; `override` ({source, target, q, ...}) is for scripting and tests.
async function translate(override = {}) {
  if (controller) controller.abort();
  const req = request(override);
  messages.clear();
  if (!req.target) {
    messages.fail("Choose the language to translate into first.");
    return tgt.focus();
  }
  if (!String(req.q).trim()) {
    messages.fail("Type or paste some text to translate.");
    return source.focus();
  }
  const ctl = (controller = new AbortController());
  const text = document.createTextNode("");
  output.replaceChildren(text);
  output.lang = req.target;
  if (req.source !== "auto") source.lang = req.source;
  details.hidden = altsBox.hidden = true;
  window.__tokenEvents = 0;
  const beams = req.alternatives > 0 || req.parameters.beam_size > 1;
  messages.say(beams ? "Translating with beam search: text appears once the beams agree on it…" : "Translating…");
  setBusy(true);
  const started = performance.now();
  let firstAt = 0, finished = false;
  try {
    const r = await fetch("/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(req),
      signal: ctl.signal,
    });
    if (!r.ok) return await messages.failWith(r);
    if (!isEventStream(r)) {
      const body = await r.json(); // a proxy that does not stream answered as plain JSON
      text.data = body.translatedText;
      return showDone(body, started, 0, req.target);
    }
    for await (const ev of readEvents(r.body, ctl.signal)) {
      const data = JSON.parse(ev.data);
      if (ev.event === "token") {
        if (!firstAt) firstAt = performance.now();
        window.__tokenEvents++;
        text.appendData(data.token.text);
      } else if (ev.event === "done") {
        finished = true;
        text.data = data.translatedText;
        showDone(data, started, firstAt, req.target);
      } else if (ev.event === "error") {
        finished = true;
        messages.fail(data.error, data.error_type);
      }
    }
    if (!finished) messages.fail("The connection closed before the translation finished.");
  } catch (e) {
    if (!ctl.signal.aborted) messages.fail(`Could not reach the server: ${e.message}.`);
    else if (controller === ctl) messages.say("Stopped.");
  } finally {
    if (controller === ctl) {
      controller = null;
      setBusy(false);
    }
  }
}

// Swap the languages (auto: the detected one) and move the translation into the text box.
function swapLanguages() {
  const from = knownSource(), into = tgt.value;
  if (!from || swap.disabled) return;
  src.value = into;
  fillTargets();
  tgt.value = from;
  if (output.textContent) source.value = output.textContent;
  output.replaceChildren();
  details.hidden = altsBox.hidden = true;
  copy.disabled = true;
  languagesChanged();
}

async function copyResult() {
  const value = output.textContent;
  try {
    await navigator.clipboard.writeText(value);
  } catch (_) {
    const area = document.createElement("textarea"); // fallback for plain-http origins
    area.value = value;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    if (!ok) return messages.fail("Copying is not allowed here: select the translation and copy it by hand.");
  }
  messages.say("Copied the translation.");
  copy.focus();
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  translate();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    translate();
  } else if (e.key === "Escape" && controller) {
    controller.abort();
  }
});
src.addEventListener("change", () => {
  fillTargets();
  languagesChanged();
});
tgt.addEventListener("change", languagesChanged);
swap.addEventListener("click", swapLanguages);
stop.addEventListener("click", () => controller && controller.abort());
copy.addEventListener("click", copyResult);
window.mtPage = { translate };
const pair = () => ({ source: src.value || "auto", target: tgt.value });
loadLanguages().then(loadInfo).then((info) => setupFiles(pair, showDetected, info));
