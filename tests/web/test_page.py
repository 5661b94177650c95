"""The "try it" page in a real headless Chromium against real servers: it loads, streams, and shows errors."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess

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
    "--disable-background-networking --disable-component-update --disable-sync --window-size=1100,900"
).split()


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
    """Headless Chromium with a fresh profile and no background network traffic."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER), log_output=os.devnull)
    driver = webdriver.Chrome(options=options, service=service)
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
    """Load the page and wait for the language list."""
    driver.get(url + "/")
    WebDriverWait(driver, WAIT_S).until(lambda d: js(d, "return !!document.querySelector('#pair option[data-target]')"))


def fill(driver, text: str, alternatives: int = 0) -> None:
    """Type the text and set the alternatives box."""
    source = driver.find_element(By.ID, "source")
    source.clear()
    source.send_keys(text)
    alts = driver.find_element(By.ID, "alts")
    alts.clear()
    alts.send_keys(str(alternatives))


def wait_done(driver) -> str:
    """Wait for the translation to finish; the output's exact text."""
    WebDriverWait(driver, WAIT_S).until(
        lambda d: js(d, "return document.getElementById('status').textContent.startsWith('Done')")
    )
    return js(driver, "return document.getElementById('output').textContent")


def wait_error(driver) -> str:
    """Wait for the alert region to say something; its text."""
    WebDriverWait(driver, WAIT_S).until(lambda d: d.find_element(By.ID, "error").text.strip())
    return driver.find_element(By.ID, "error").text


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
    for name, ctype in (("app.js", "text/javascript"), ("style.css", "text/css")):
        assert HTTP.get(f"{url}/static/{name}").headers["content-type"].startswith(ctype)
    assert HTTP.get(url + "/static/index.py").status_code == 404
    assert "/" not in HTTP.get(url + "/openapi.json").json()["paths"]

    open_page(browser, url)
    assert browser.title.startswith("Translate")
    options = "return [...document.querySelectorAll('#pair option')]"
    pairs = js(browser, options + ".map(o => [o.dataset.source, o.dataset.target])")
    assert pairs == [["en", "es"]]
    assert "English" in browser.find_element(By.ID, "pair").text
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
    js(
        browser,
        "const o = new Option('English → Klingon'); o.dataset.source = 'en'; o.dataset.target = 'xx';"
        "const s = document.getElementById('pair'); s.add(o); s.value = o.value; o.selected = true;",
    )
    browser.find_element(By.ID, "go").click()
    message = wait_error(browser)
    assert "language pair is not available" in message and "xx is not supported" in message
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
    the same translation and glossary report as the JSON answer with that glossary."""
    url = servers["ok"].url
    open_page(browser, url)
    fill(browser, TEXT)
    js(browser, "const g = document.getElementById('glossary'); g.value = arguments[0];"  # as pasted: a typed tab
       "g.dispatchEvent(new Event('input', {bubbles: true}));", "dog\tperro\nred = rojo")  # would leave the box
    browser.find_element(By.ID, "go").click()
    final = wait_done(browser)
    expected = answer(url, TEXT, glossary="dog\tperro\nred\trojo")
    assert final == expected["translatedText"]
    shown = js(browser, "return document.getElementById('details').textContent")
    assert "dog → perro" in shown and "red → rojo" in shown
