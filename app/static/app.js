// The "try it" page: POST /translate with {"stream": true}, read the server-sent events off the body.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const form = $("form"), pair = $("pair"), source = $("source"), output = $("output");
  const beam = $("beam"), alts = $("alts"), maxnew = $("maxnew");
  const go = $("go"), stop = $("stop"), copy = $("copy");
  const errorBox = $("error"), status = $("status"), details = $("details");
  const altsBox = $("alts-box"), altsList = $("alternatives");
  let names;
  try {
    names = new Intl.DisplayNames(["en"], { type: "language" });
  } catch (_) {
    names = null;
  }
  const langName = (code) => {
    try {
      return (names && names.of(code)) || code;
    } catch (_) {
      return code;
    }
  };
  const HELP = {
    unsupported_language: "This language pair is not available on this server.",
    overloaded: "The server is busy right now.",
    not_ready: "The server is not ready (still loading, or shutting down).",
    validation: "The request was not accepted.",
    payload_too_large: "The text is too long.",
    forbidden: "This server needs an API key.",
    generation: "The model failed on this text.",
  };
  let controller = null;
  window.__tokenEvents = 0; // token events rendered by the last translation (read by the browser tests)

  // The alert: a plain-language headline, then the server's own message (it names the field and the limit).
  function showError(message, type, retryAfter) {
    const head = document.createElement("strong");
    head.textContent = (HELP[type] || "") + (retryAfter ? ` Try again in ${retryAfter} s.` : "");
    const more = document.createElement("span");
    more.textContent = message;
    errorBox.replaceChildren(...(head.textContent ? [head, more] : [more]));
  }

  function setBusy(busy) {
    output.setAttribute("aria-busy", String(busy));
    stop.disabled = !busy;
    go.textContent = busy ? "Translating…" : "Translate";
    copy.disabled = busy || !output.textContent;
  }

  function int(input) {
    const n = parseInt(input.value, 10);
    return Number.isFinite(n) ? n : null;
  }

  async function loadLanguages() {
    try {
      const r = await fetch("/languages");
      const langs = await r.json();
      if (!r.ok) throw new Error(langs.error || `HTTP ${r.status}`);
      pair.textContent = "";
      for (const lang of langs) {
        for (const target of lang.targets) {
          const opt = new Option(`${lang.name || langName(lang.code)} → ${langName(target)}`);
          opt.dataset.source = lang.code;
          opt.dataset.target = target;
          pair.add(opt);
        }
      }
      if (!pair.options.length) pair.add(new Option("No models loaded", ""));
    } catch (e) {
      pair.textContent = "";
      pair.add(new Option("Unavailable", ""));
      showError(`Could not load the language list: ${e.message}.`);
    }
    try {
      const info = await (await fetch("/info")).json();
      const lim = info.limits || {};
      if (lim.max_beam_size) {
        beam.max = lim.max_beam_size;
        alts.max = lim.max_beam_size - 1;
      }
      if (lim.max_new_tokens) maxnew.max = lim.max_new_tokens;
      if (lim.default_max_new_tokens) maxnew.placeholder = `default ${lim.default_max_new_tokens}`;
      const m = (info.models || []).map((m) => `${m.name} (${m.device}, ${m.dtype})`).join(", ");
      if (m) $("server").textContent = `mt-server ${info.version} · ${m}`;
    } catch (_) {
      // the page works without /info
    }
  }

  // Server-sent events from a fetch() body: yields {event, data} per dispatched event (comments skipped).
  async function* readEvents(body, signal) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "", name = "", data = [];
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += value;
        let nl;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
          if (buf[nl] === "\r" && nl === buf.length - 1) break; // a \r\n split across chunks
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
          if (line === "") {
            if (data.length) yield { event: name || "message", data: data.join("\n") };
            name = "";
            data = [];
          } else if (line[0] !== ":") {
            const i = line.indexOf(":");
            const field = i < 0 ? line : line.slice(0, i);
            let val = i < 0 ? "" : line.slice(i + 1);
            if (val[0] === " ") val = val.slice(1);
            if (field === "event") name = val;
            else if (field === "data") data.push(val);
          }
        }
      }
    } finally {
      if (!signal.aborted) reader.cancel().catch(() => {});
    }
  }

  function showDone(body, started, firstAt) {
    const d = body.details || {};
    const seconds = (d.total_ms || 0) / 1000;
    const rate = seconds > 0 ? d.generated_tokens / seconds : 0;
    const rows = [
      ["Model", d.model],
      ["Tokens", `${d.input_tokens} in, ${d.generated_tokens} out (${d.finish_reason})`],
      ["Latency", `${fmt(d.total_ms)} ms on the server (queue ${fmt(d.queue_ms)} ms), ${fmt(performance.now() - started)} ms here`],
      ["Speed", `${rate ? rate.toFixed(1) : "–"} tokens/s`],
    ];
    if (firstAt) rows.push(["First token", `${fmt(firstAt - started)} ms`]);
    if (d.glossary) {
      const terms = d.glossary.map((e) => `${e.source} → ${e.target} ${e.applied ? "✓" : "✗ (not in the output)"}`);
      rows.push(["Glossary", terms.length ? terms.join("; ") : "no term matched"]);
    }
    details.textContent = "";
    for (const [k, v] of rows) {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = k;
      dd.textContent = v;
      details.append(dt, dd);
    }
    details.hidden = false;
    altsList.textContent = "";
    for (const alt of body.alternatives || []) {
      const li = document.createElement("li");
      li.textContent = alt;
      altsList.append(li);
    }
    altsBox.hidden = !altsList.children.length;
    status.textContent = `Done: ${d.generated_tokens} tokens in ${fmt(d.total_ms)} ms, ${rate.toFixed(1)} tokens/s.`;
  }

  // The pasted terms as TSV: "source<TAB>target" lines as they are, "source = target" lines converted.
  function glossaryTsv(text) {
    return text
      .split("\n")
      .map((line) => (line.includes("\t") || !line.includes(" = ") ? line : line.replace(" = ", "\t")))
      .filter((line) => line.trim())
      .join("\n");
  }

  const fmt = (ms) => (ms == null ? "–" : ms < 10 ? ms.toFixed(1) : Math.round(ms).toString());

  // Translate the form's text; `override` ({source, target, q, ...}) is for scripting and tests.
  async function translate(override = {}) {
    if (controller) controller.abort();
    const opt = pair.selectedOptions[0];
    const req = {
      q: source.value,
      source: opt && opt.dataset.source,
      target: opt && opt.dataset.target,
      alternatives: Math.max(0, int(alts) || 0),
      parameters: { beam_size: Math.max(1, int(beam) || 1) },
      ...override,
      stream: true,
    };
    if (int(maxnew)) req.parameters.max_new_tokens = int(maxnew);
    const terms = glossaryTsv($("glossary").value);
    if (terms && !("glossary" in override)) req.glossary = terms;
    errorBox.textContent = "";
    if (!req.source || !req.target) {
      showError("Choose a language pair first.");
      pair.focus();
      return;
    }
    if (!String(req.q).trim()) {
      showError("Type or paste some text to translate.");
      source.focus();
      return;
    }
    const ctl = (controller = new AbortController());
    const text = document.createTextNode("");
    output.replaceChildren(text);
    output.lang = req.target;
    source.lang = req.source;
    details.hidden = altsBox.hidden = true;
    window.__tokenEvents = 0;
    const beams = req.alternatives > 0 || req.parameters.beam_size > 1;
    status.textContent = beams ? "Translating with beam search: text appears once the beams agree on it…" : "Translating…";
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
      if (!r.ok || !(r.headers.get("content-type") || "").startsWith("text/event-stream")) {
        let body = {};
        try {
          body = await r.json();
        } catch (_) {
          body = { error: `HTTP ${r.status} ${r.statusText}` };
        }
        if (r.ok && typeof body.translatedText === "string") {
          text.data = body.translatedText; // a proxy that does not stream answered as plain JSON
          showDone(body, started, 0);
        } else {
          showError(body.error || `HTTP ${r.status}`, body.error_type, r.headers.get("Retry-After"));
          status.textContent = "";
        }
        return;
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
          showDone(data, started, firstAt);
        } else if (ev.event === "error") {
          finished = true;
          showError(data.error, data.error_type);
          status.textContent = "";
        }
      }
      if (!finished) {
        showError("The connection closed before the translation finished.");
        status.textContent = "";
      }
    } catch (e) {
      if (ctl.signal.aborted) {
        if (controller === ctl) status.textContent = "Stopped.";
      } else {
        showError(`Could not reach the server: ${e.message}.`);
        status.textContent = "";
      }
    } finally {
      if (controller === ctl) {
        controller = null;
        setBusy(false);
      }
    }
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
      if (!ok) {
        showError("Copying is not allowed here: select the translation and copy it by hand.");
        return;
      }
    }
    status.textContent = "Copied the translation.";
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
  stop.addEventListener("click", () => controller && controller.abort());
  copy.addEventListener("click", copyResult);
  window.mtPage = { translate };
  loadLanguages();
})();
