"""The "try it" page in a real headless Chromium (a 1280x800 viewport) against real servers: it loads, streams,
detects, swaps, translates files, and shows errors and status in view."""

from __future__ import annotations

import io
import os
import shutil
import time
from pathlib import Path

import docx
import polib
import pytest

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess
from tests.app.helpers import ok
from tests.documents import build

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(
        "needs Debian chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver; see .ci/system-deps)",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (the test extras)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TEXT = "a big red dog runs in the city"
WAIT_S = 30
FLAGS = (
    "--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-quic --no-first-run "
    "--disable-background-networking --disable-component-update --disable-sync --window-size=1280,800"
).split()
VIEWPORT = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}


@pytest.fixture(scope="module")
def servers(server, native_dir):
    """The tiny model served twice: the shared server (tests/conftest.py) and one whose queue takes nothing."""
    busy = ServerProcess("--model", str(native_dir), "--max-wait-ms", "5", "--warmup-rounds", "1", "--max-queue", "0")
    try:
        busy.wait()
        page = HTTP.get(server.url + "/", timeout=10)
        assert page.status_code == 200, "GET / is not served: include app.api.page.router in create_app"
        yield {"ok": server, "busy": busy}
    finally:
        busy.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium with a fresh profile, no background network traffic, a 1280x800 viewport, and downloads
    saved to `browser.downloads`."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER), log_output=os.devnull)
    driver = webdriver.Chrome(options=options, service=service)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", VIEWPORT)
    driver.downloads = tmp_path_factory.mktemp("downloads")
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(driver.downloads)})
    yield driver
    driver.quit()


def screenshot(driver, name: str) -> Path:
    """Save a PNG to /tmp (and to $MT_SCREENSHOT_DIR when set)."""
    path = Path("/tmp") / name
    assert driver.save_screenshot(str(path))
    if os.environ.get("MT_SCREENSHOT_DIR"):
        Path(os.environ["MT_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ["MT_SCREENSHOT_DIR"]) / name)
    return path


def js(driver, script: str, *args):
    """Run a script in the page and return its value."""
    return driver.execute_script(script, *args)


def open_page(driver, url: str) -> None:
    """Load the page and wait for the language lists and the file form."""
    driver.get(url + "/")
    WebDriverWait(driver, WAIT_S).until(lambda d: js(d, "return !!document.querySelector('#tgt option[data-code]')"))
    WebDriverWait(driver, WAIT_S).until(lambda d: js(d, "return !!document.getElementById('file').accept"))


def choose(driver, source: str, target: str) -> None:
    """Pick the languages as a user does (a change event each)."""
    for select, code in (("src", source), ("tgt", target)):
        js(driver, "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
           "s.dispatchEvent(new Event('change', {bubbles: true}));", select, code)  # fmt: skip


def fill(driver, text: str, alternatives: int = 0) -> None:
    """Type the text and set the alternatives box (in Options)."""
    source = driver.find_element(By.ID, "source")
    source.clear()
    source.send_keys(text)
    js(driver, "document.getElementById('options').open = true")
    alts = driver.find_element(By.ID, "alts")
    alts.clear()
    alts.send_keys(str(alternatives))


def wait_done(driver) -> str:
    """Wait for the translation to finish; the output's exact text."""
    WebDriverWait(driver, WAIT_S).until(
        lambda d: js(d, "return document.getElementById('status').textContent.startsWith('Done')")
    )
    return js(driver, "return document.getElementById('output').textContent")


def wait_error(driver, box: str = "error") -> str:
    """Wait for an alert region to say something; its text."""
    WebDriverWait(driver, WAIT_S).until(lambda d: d.find_element(By.ID, box).text.strip())
    return driver.find_element(By.ID, box).text


def in_view(driver, element_id: str) -> bool:
    """The element is shown and wholly inside the 1280x800 viewport, unscrolled."""
    box = js(driver, "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
             "return [r.top, r.bottom, r.height, window.scrollY, window.innerHeight];", element_id)  # fmt: skip
    top, bottom, height, scrolled, viewport = box
    return height > 0 and top >= 0 and bottom <= viewport == 800 and scrolled == 0


def answer(url: str, q: str, **extra) -> dict:
    """The JSON answer for what the page sends (greedy unless alternatives ask for beams)."""
    body = {"q": q, "source": "en", "target": "es", "parameters": {"beam_size": 1}, **extra}
    r = HTTP.post(url + "/translate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_page_loads_and_lists_the_pairs(servers, browser):
    """The page, its script and stylesheet load from this server alone; en->es is offered; controls have labels."""
    url = servers["ok"].url
    r = HTTP.get(url + "/")
    assert r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    scripts = (("app.js", "text/javascript"), ("events.js", "text/javascript"), ("files.js", "text/javascript"))
    for name, ctype in (*scripts, ("style.css", "text/css")):
        assert HTTP.get(f"{url}/static/{name}").headers["content-type"].startswith(ctype)
    assert HTTP.get(url + "/static/index.py").status_code == 404
    assert "/" not in HTTP.get(url + "/openapi.json").json()["paths"]

    open_page(browser, url)
    assert browser.title.startswith("Translate")
    options = "return [...document.getElementById(arguments[0]).options].map(o => o.value)"
    assert (js(browser, options, "src"), js(browser, options, "tgt")) == (["auto", "en"], ["es"])
    assert "Detect language" in browser.find_element(By.ID, "src").text
    assert "Spanish" in browser.find_element(By.ID, "tgt").text
    assert "en-es" in browser.find_element(By.ID, "server").text
    assert not browser.find_element(By.ID, "demo").is_displayed()  # a model of one's own: no demo notice
    unlabelled = js(
        browser,
        "return [...document.querySelectorAll('input, select, textarea')]"
        ".filter(e => !document.querySelector(`label[for='${e.id}']`)).map(e => e.id)",
    )
    assert unlabelled == []
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_translation_streams_in_and_equals_the_json_answer(servers, browser):
    """Token events grow the output step by step; it ends equal to the JSON answer; details and Copy work."""
    url = servers["ok"].url
    open_page(browser, url)
    fill(browser, TEXT)
    js(
        browser,
        "const out = document.getElementById('output'); window.__seen = [];"
        "new MutationObserver(() => window.__seen.push(out.textContent))"
        ".observe(out, {subtree: true, childList: true, characterData: true});",
    )
    browser.find_element(By.ID, "go").click()
    final = wait_done(browser)
    expected = answer(url, TEXT)
    assert final == expected["translatedText"] and final
    assert js(browser, "return window.__tokenEvents") >= 2
    seen = js(browser, "return window.__seen")
    assert any(0 < len(s) < len(final) and final.startswith(s) for s in seen), seen
    details = browser.find_element(By.ID, "details").text
    assert "tokens/s" in details and "ms" in details and "en-es" in details
    assert browser.find_element(By.ID, "alts-box").is_displayed() is False

    copy = browser.find_element(By.ID, "copy")
    assert copy.is_enabled()
    copy.click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "Copied" in d.find_element(By.ID, "status").text)


def test_ctrl_enter_submits(servers, browser):
    """Keyboard only: Ctrl+Enter in the text box translates."""
    url = servers["ok"].url
    open_page(browser, url)
    fill(browser, "the cat sleeps")
    browser.find_element(By.ID, "source").send_keys(Keys.CONTROL, Keys.ENTER)
    assert wait_done(browser) == answer(url, "the cat sleeps")["translatedText"]
    assert js(browser, "return document.getElementById('source').value") == "the cat sleeps"  # no newline typed


def test_alternatives_arrive_with_done(servers, browser):
    """Alternatives need beam search: its text streams once stable, and the n-best list comes with done."""
    url = servers["ok"].url
    open_page(browser, url)
    fill(browser, TEXT, alternatives=2)
    browser.find_element(By.ID, "go").click()
    final = wait_done(browser)
    expected = answer(url, TEXT, alternatives=2)
    assert final == expected["translatedText"]
    assert js(browser, "return window.__tokenEvents") >= 1
    items = js(browser, "return [...document.querySelectorAll('#alternatives li')].map(li => li.textContent)")
    assert items == expected["alternatives"] and len(items) == 2
    assert browser.find_element(By.ID, "alts-box").is_displayed()
    screenshot(browser, "mt-page.png")


def test_stop_aborts_the_stream(servers, browser):
    """Stop aborts the fetch mid-stream: the partial text stays and the page says so."""
    open_page(browser, servers["ok"].url)
    fill(browser, TEXT)
    long = {"beam_size": 1, "max_new_tokens": 255, "min_new_tokens": 255}
    browser.set_script_timeout(WAIT_S)
    clicked = browser.execute_async_script(  # click Stop as soon as the first token is on screen
        "const [params, done] = arguments; window.mtPage.translate({parameters: params});"
        "const poll = setInterval(() => { if (window.__tokenEvents >= 1) {"
        "  clearInterval(poll); const b = document.getElementById('stop'); const ok = !b.disabled; b.click(); done(ok);"
        "} }, 1);",
        long,
    )
    assert clicked
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "status").text == "Stopped.")
    assert js(browser, "return document.getElementById('output').getAttribute('aria-busy')") == "false"
    assert browser.find_element(By.ID, "error").text == ""
    assert browser.find_element(By.ID, "go").is_enabled() and not browser.find_element(By.ID, "stop").is_enabled()


def test_unsupported_pair_shows_a_readable_message(servers, browser):
    """A pair the server does not serve: the alert names the problem and the pair."""
    open_page(browser, servers["ok"].url)
    fill(browser, TEXT)
    js(browser, "const s = document.getElementById('tgt'); s.add(new Option('Klingon', 'xx')); s.value = 'xx';")
    browser.find_element(By.ID, "go").click()
    message = wait_error(browser)
    assert "language pair is not available" in message and "xx is not supported as a target" in message
    assert "served pairs: en-es" in message and in_view(browser, "error")
    assert js(browser, "return document.getElementById('error').getAttribute('role')") == "alert"
    screenshot(browser, "mt-page-error.png")


def test_overloaded_server_shows_a_readable_message(servers, browser):
    """A server whose queue is full: the alert says it is busy and when to retry."""
    open_page(browser, servers["busy"].url)
    fill(browser, TEXT)
    browser.find_element(By.ID, "go").click()
    message = wait_error(browser)
    assert "busy" in message and "overloaded" in message and "Try again in 1 s" in message
    assert js(browser, "return document.getElementById('output').getAttribute('aria-busy')") == "false"


def test_pasted_terms_go_as_the_inline_glossary(servers, browser):
    """Terms pasted as "source<TAB>target" or "source = target" lines are sent as the inline glossary: the page shows
    the same translation as the answer with that glossary (the page streams; a text with terms streams whole, as the
    answer has it) and the glossary's report."""
    url = servers["ok"].url
    open_page(browser, url)
    fill(browser, TEXT)
    js(browser, "const g = document.getElementById('glossary'); g.value = arguments[0];"  # as pasted: a typed tab
       "g.dispatchEvent(new Event('input', {bubbles: true}));", "dog\tperro\nred = rojo")  # would leave the box
    browser.find_element(By.ID, "go").click()
    final = wait_done(browser)
    assert final == ok(url, TEXT, glossary="dog\tperro\nred\trojo")["translatedText"]
    shown = js(browser, "return document.getElementById('details').textContent")
    assert "dog → perro" in shown and "red → rojo" in shown


def texts_of(name: str, data: bytes) -> list:
    """The paragraphs of a .docx, the (msgid, msgstr, plural forms) entries of a .po."""
    if name.endswith(".docx"):
        return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs]
    return [(e.msgid, e.msgstr, dict(e.msgstr_plural)) for e in polib.pofile(data.decode())]


def downloaded(folder: Path, name: str) -> bytes:
    """The file Chromium saved under `name`, once it is whole."""
    path = folder / name
    deadline = time.monotonic() + WAIT_S
    while not (path.exists() and not list(folder.glob("*.crdownload"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.read_bytes()


@pytest.mark.parametrize(("name", "data"), [("a.docx", build.word()), ("a.po", build.gettext())])
def test_files_come_back_translated(servers, browser, tmp_path, name, data):
    """A .docx and a .po chosen in the file form: progress while its segments are translated, then a link whose
    file (saved by Chromium) holds what /translate_file answers for the same upload, translated; status in view."""
    url = servers["ok"].url
    open_page(browser, url)
    (tmp_path / name).write_bytes(data)
    js(browser, "const box = document.getElementById('file-status'); window.__fileSeen = [];"
       "new MutationObserver(() => window.__fileSeen.push(box.textContent))"
       ".observe(box, {subtree: true, childList: true, characterData: true});")  # fmt: skip
    browser.find_element(By.ID, "file").send_keys(str(tmp_path / name))
    browser.find_element(By.ID, "file-go").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "file-download").is_displayed())
    seen = js(browser, "return window.__fileSeen")
    assert any(f"Translating {name}:" in s and "segments" in s for s in seen), seen
    assert browser.find_element(By.ID, "file-status").text.startswith(f"Done: {name} translated")
    assert in_view(browser, "file-status") and browser.find_element(By.ID, "file-error").text == ""
    screenshot(browser, f"mt-page-file-{name.split('.')[1]}.png")
    browser.find_element(By.ID, "file-download").click()
    got = downloaded(browser.downloads, name)
    fields = {"source": "auto", "target": "es", "direct": "true"}
    direct = HTTP.post(url + "/translate_file", files={"file": (name, data)}, data=fields, timeout=60)
    assert direct.status_code == 200, direct.text
    assert texts_of(name, got) == texts_of(name, direct.content) != texts_of(name, data)


def test_a_file_refused_says_why(servers, browser, tmp_path):
    """A file the server does not translate (.pdf): the file form's alert names the formats taken."""
    open_page(browser, servers["ok"].url)
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.4")
    browser.find_element(By.ID, "file").send_keys(str(tmp_path / "a.pdf"))
    browser.find_element(By.ID, "file-go").click()
    message = wait_error(browser, "file-error")
    assert "pdf" in message and "docx" in message and browser.find_element(By.ID, "file-status").text == ""


def test_status_never_goes_stale(servers, browser):
    """One message at a time: after Done, an empty text's alert stands alone (no "Done" beside it); the next
    translation clears the alert. Catches a status left from the previous action."""
    open_page(browser, servers["ok"].url)
    fill(browser, TEXT)
    browser.find_element(By.ID, "go").click()
    wait_done(browser)
    browser.find_element(By.ID, "source").clear()
    browser.find_element(By.ID, "go").click()
    assert "Type or paste" in wait_error(browser) and browser.find_element(By.ID, "status").text == ""
    fill(browser, TEXT)
    browser.find_element(By.ID, "go").click()
    wait_done(browser)
    assert browser.find_element(By.ID, "error").text == "" and in_view(browser, "status")


def test_builtin_model_page_says_demo_and_detects(builtin, browser):
    """The built-in model: the page says it is a small demo; placeholders read as hints (muted italics, no sample
    terms); "Hello world" from "Detect language" shows where it came from; status and details in view."""
    open_page(browser, builtin.url)
    assert "(built-in)" in browser.find_element(By.ID, "server").text
    demo = browser.find_element(By.ID, "demo")
    assert demo.is_displayed() and "small demo" in demo.text
    for field in ("source", "glossary"):
        style = js(browser, "const s = getComputedStyle(document.getElementById(arguments[0]), '::placeholder');"
                   "return [s.fontStyle, s.color];", field)  # fmt: skip
        assert style[0] == "italic" and style[1] != js(browser, "return getComputedStyle(document.body).color")
    assert "\t" not in browser.find_element(By.ID, "glossary").get_attribute("placeholder")
    empty = js(browser, "const s = getComputedStyle(document.getElementById('output'), '::before');"
               "return [s.content, s.fontStyle];")  # fmt: skip
    assert empty == ['"The translation appears here"', "italic"]
    screenshot(browser, "mt-page-builtin.png")
    fill(browser, "Hello world")
    js(browser, "document.getElementById('options').open = false")
    browser.find_element(By.ID, "go").click()
    assert wait_done(browser) == answer(builtin.url, "Hello world")["translatedText"]
    assert "From English" in browser.find_element(By.ID, "detected").text
    assert in_view(browser, "status") and in_view(browser, "details")
    screenshot(browser, "mt-page-builtin-done.png")


def test_auto_shows_the_detected_language_and_swap_reverses_the_pair(families, browser):
    """Several sources into es: "Hello world" is detected as English and shown so; the reverse pair es->en is
    served, so swap turns the pair round and moves the translation into the text box. Into it (only en is
    served), the page says it took the only source, and swap stays off (it->en is not served)."""
    open_page(browser, families.url)
    choose(browser, "auto", "es")
    fill(browser, "Hello world")
    browser.find_element(By.ID, "go").click()
    translated = wait_done(browser)
    assert browser.find_element(By.ID, "detected").text.startswith("Detected: English (")
    swap = browser.find_element(By.ID, "swap")
    assert swap.is_enabled()
    swap.click()
    values = "return ['src', 'tgt', 'source'].map(id => document.getElementById(id).value)"
    assert js(browser, values) == ["es", "en", translated]
    assert browser.find_element(By.ID, "output").text == "" and browser.find_element(By.ID, "status").text == ""
    screenshot(browser, "mt-page-swapped.png")
    choose(browser, "auto", "it")
    fill(browser, "Hello world")
    browser.find_element(By.ID, "go").click()
    wait_done(browser)
    assert browser.find_element(By.ID, "detected").text.startswith("From English: the only language")
    assert not browser.find_element(By.ID, "swap").is_enabled()


def test_low_confidence_sentences_are_marked(builtin, browser):
    """At threshold 1 every sentence is low: each one is marked (with its confidence in the title) and the text reads
    as the JSON answer; at 0 none is. Catches a page that ignores details.sentences' `low`."""
    open_page(browser, builtin.url)
    text = "Good morning. The house is big."
    marks = "return [...document.querySelectorAll('#output mark.low-confidence')].map((m) => [m.textContent, m.title])"
    for threshold, count in ((1.0, 2), (0.0, 0)):
        fill(browser, text)
        js(browser, "window.mtPage.translate({parameters: {beam_size: 1, confidence_threshold: arguments[0]}})",
           threshold)  # fmt: skip
        assert wait_done(browser) == answer(builtin.url, text)["translatedText"]
        marked = js(browser, marks)
        assert len(marked) == count and all(title.startswith("Confidence 0.") for _, title in marked), marked
        assert "Confidence" in browser.find_element(By.ID, "details").text
