// The file form: POST /translate_file (multipart) asking for progress events, a progress bar while the segments are
// translated, then a link to the translated file (GET /download_file/...).
import { Messages, isEventStream, readEvents } from "/static/events.js";

const $ = (id) => document.getElementById(id);

// Wire the file form; `pair()` gives the chosen {source, target}, `showDetected(found, target)` shows detection.
export async function setupFiles(pair, showDetected, info) {
  const input = $("file"), go = $("file-go"), bar = $("file-progress"), link = $("file-download");
  const messages = new Messages($("file-error"), $("file-status"));
  const maxBytes = (info.limits || {}).max_file_bytes;
  let controller = null;
  try {
    const settings = await (await fetch("/frontend/settings")).json();
    input.accept = (settings.supportedFilesFormat || []).join(",");
  } catch (_) {
    // every file is offered; the server names the formats it takes when it refuses one
  }
  if (maxBytes) $("file-hint").append(` Up to ${(maxBytes / 1e6).toFixed(maxBytes < 1e6 ? 1 : 0)} MB.`);

  function finish() {
    controller = null;
    go.disabled = false;
    bar.hidden = true;
  }

  function progress(name, data) {
    bar.max = Math.max(data.total, 1);
    bar.value = data.done;
    messages.say(`Translating ${name}: ${data.done} of ${data.total} segments…`);
  }

  function done(file, data, target) {
    link.href = data.translatedFileUrl;
    link.download = file.name;
    link.textContent = `Download ${file.name} (${target})`;
    link.hidden = false;
    const d = data.details || {};
    const flagged = d.flagged ? `, ${d.flagged} kept as they were (see the file's notes)` : "";
    messages.say(`Done: ${file.name} translated, ${d.segments} segments by ${d.model}${flagged}.`);
    if (data.detectedLanguage) showDetected(data.detectedLanguage, target);
  }

  async function translateFile() {
    messages.clear();
    link.hidden = true;
    const file = input.files[0], { source, target } = pair();
    if (!file) return messages.fail("Choose a file first.");
    if (!target) return messages.fail("Choose the language to translate into first.");
    if (maxBytes && file.size > maxBytes) {
      return messages.fail(`${file.name} is ${file.size} bytes, over this server's max_file_bytes=${maxBytes}.`);
    }
    const body = new FormData();
    body.append("file", file);
    body.append("source", source);
    body.append("target", target);
    const ctl = (controller = new AbortController());
    go.disabled = true;
    bar.hidden = false;
    bar.removeAttribute("value"); // indeterminate while uploading
    messages.say(`Uploading ${file.name}…`);
    try {
      const headers = { Accept: "text/event-stream" };
      const r = await fetch("/translate_file", { method: "POST", headers, body, signal: ctl.signal });
      if (!r.ok || !isEventStream(r)) return await messages.failWith(r);
      let finished = false;
      for await (const ev of readEvents(r.body, ctl.signal)) {
        const data = JSON.parse(ev.data);
        if (ev.event === "progress") {
          progress(file.name, data);
        } else if (ev.event === "done") {
          finished = true;
          done(file, data, target);
        } else if (ev.event === "error") {
          finished = true;
          messages.fail(data.error, data.error_type);
        }
      }
      if (!finished) messages.fail("The connection closed before the file was translated.");
    } catch (e) {
      if (!ctl.signal.aborted) messages.fail(`Could not reach the server: ${e.message}.`);
    } finally {
      if (controller === ctl) finish();
    }
  }

  go.addEventListener("click", translateFile);
  input.addEventListener("change", () => {
    messages.clear();
    link.hidden = true;
  });
}
