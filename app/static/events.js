// What the page's two forms share: server-sent events read off a fetch() body, one message line per form (an alert
// or a status, never both), language names, and the server's JSON errors.

// Server-sent events from a fetch() body: yields {event, data} per dispatched event (comments skipped).
export async function* readEvents(body, signal) {
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

// A plain-language headline per error type; the server's own message follows it (it names the field and limit).
const HELP = {
  unsupported_language: "This language pair is not available on this server.",
  unsupported_media_type: "This kind of file is not translated here.",
  overloaded: "The server is busy right now.",
  not_ready: "The server is not ready (still loading, or shutting down).",
  validation: "The request was not accepted.",
  payload_too_large: "That is too long for this server.",
  forbidden: "This server needs an API key.",
  rate_limited: "Too many requests: slow down.",
  generation: "The model failed on this text.",
};

// One form's message line: an alert (role=alert) and a status (role=status), of which one shows at a time.
export class Messages {
  constructor(alertBox, statusLine) {
    this.alert = alertBox;
    this.status = statusLine;
  }

  clear() {
    this.alert.textContent = "";
    this.status.textContent = "";
  }

  say(text) {
    this.alert.textContent = "";
    this.status.textContent = text;
  }

  fail(message, type, retryAfter) {
    this.status.textContent = "";
    const head = document.createElement("strong");
    head.textContent = (HELP[type] || "") + (retryAfter ? ` Try again in ${retryAfter} s.` : "");
    const more = document.createElement("span");
    more.textContent = message;
    this.alert.replaceChildren(...(head.textContent ? [head, more] : [more]));
  }

  // The JSON error body of a failed response, shown.
  async failWith(response) {
    let body;
    try {
      body = await response.json();
    } catch (_) {
      body = { error: `HTTP ${response.status} ${response.statusText}` };
    }
    this.fail(body.error || body.message || `HTTP ${response.status}`, body.error_type, response.headers.get("Retry-After"));
  }
}

let names = null;
try {
  names = new Intl.DisplayNames(["en"], { type: "language" });
} catch (_) {
  names = null;
}

// A language's English name from its code ("es" -> "Spanish"), the code itself when unknown.
export function langName(code) {
  try {
    return (names && names.of(code)) || code;
  } catch (_) {
    return code;
  }
}

export const isEventStream = (r) => (r.headers.get("content-type") || "").startsWith("text/event-stream");
