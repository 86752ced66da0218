"""`citegraph report --out FILE.html` in a real browser: Debian's chromium + chromium-driver
(installed by .ci/run), driven by Selenium with the driver path set explicitly and every
network feature of Chromium off — no Selenium Manager, no download. Skipped only when
those two programs are absent.

Asserts what a person sees: the chart, the memories grouped by freshness with their text
escaped, observed locations, the diff of a changed citation, code-host links; that the
filters work; that the page logs no console error and loads nothing; and writes a
screenshot to the test's temporary folder. The HTML itself is also checked without a
browser (self-contained, escaped) so those assertions run everywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from validation_helpers import cite, index

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
HOSTILE = 'Retries keep the key <script>alert("x")</script> & <img src=x onerror=alert(1)>'


@pytest.fixture
def report_file(make_repo, home, run_cli, tmp_path):
    r = make_repo("pay", remote="https://github.com/acme/pay.git")
    r.write("src/retry.py", "def next_delay(attempt):\n    return 2 ** attempt\n\n\ndef key():\n    return 'k'\n")
    r.write("src/gone.py", "def old():\n    return 0\n")
    r.write("docs/notes.txt", "a\nb\nc\n")
    r.commit("c1")
    index(r, home)
    cite(home, r, "src/retry.py::next_delay", text=HOSTILE, topic="delay", project="payments")
    cite(home, r, "src/retry.py::key", text="Keys are stable.", topic="key", project="payments")
    cite(home, r, "src/gone.py::old", text="old() is the fallback.", topic="old", project="legacy")
    cite(home, r, "docs/notes.txt#L2-L3", text="Notes list b then c.", topic="notes", project="docs")
    r.write("src/retry.py", "def next_delay(attempt):\n    return 3 ** attempt\n\n\ndef key():\n    return 'k'\n")
    r.rm("src/gone.py")
    r.mv("docs/notes.txt", "guide/notes.txt")
    r.commit("c2")
    index(r, home)
    out = tmp_path / "report.html"
    p = run_cli("report", "--out", str(out), cwd=r.root)
    assert p.returncode == 0, p.stderr
    assert "4 memories (2 stale, 0 unknown, 2 fresh)" in p.stderr
    return out


def test_the_page_is_self_contained_and_escaped(report_file):
    page = report_file.read_text()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # nothing to fetch: no external src/href other than code-host links the reader may click
    tags = re.findall(r"<[a-zA-Z][^>]*>", page)  # text is escaped: every "<" here opens a real tag
    assert not [t for t in tags if re.search(r"\ssrc=", t)]
    assert not [t for t in tags if t.startswith("<link") and 'href="data:' not in t]
    assert "default-src 'none'" in page and "<svg" in page
    assert 'href="https://github.com/acme/pay/blob/' in page and "/src/retry.py#L1-L2" in page


browser = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                             reason="Debian chromium/chromium-driver not installed (.ci/run installs them)")


@browser
def test_report_in_headless_chromium(report_file, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1600", f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=opts)
    try:
        driver.set_page_load_timeout(30)
        driver.get(report_file.as_uri())
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "citegraph memory report" in body
        assert "stale (2)" in body and "fresh (2)" in body
        assert HOSTILE in body  # shown as text, not run
        assert driver.execute_script("return window.__xss === undefined && !document.querySelector('img[src=x]')")
        chart = driver.find_element(By.ID, "chart")
        assert chart.is_displayed() and chart.size["width"] > 100
        counts = {e.get_attribute("data-key"): e.text for e in chart.find_elements(By.CSS_SELECTOR, "text.count")}
        assert counts["memories-stale"] == "2" and counts["citations-changed"] == "1"
        assert counts["citations-deleted"] == "1" and counts["citations-relocated"] == "1"
        stale = driver.find_element(By.ID, "group-stale")
        assert "old() is the fallback." in stale.text and "Notes list b then c." not in stale.text
        # one diff per stale citation: the changed body against its own lines, the deleted
        # function against nothing (issue 22 item 7)
        diffs = [d.text for d in stale.find_elements(By.CSS_SELECTOR, "table.diff")]
        assert any("return 2 ** attempt" in d and "return 3 ** attempt" in d for d in diffs), diffs
        assert any("def old():" in d and "attempt" not in d for d in diffs), diffs
        assert "guide/notes.txt#L2-L3" in driver.find_element(By.ID, "group-fresh").text  # observed location
        assert "4 of 4 memories shown" in driver.find_element(By.ID, "f-count").text

        Select(driver.find_element(By.ID, "f-outcome")).select_by_value("deleted")
        visible = [m for m in driver.find_elements(By.CSS_SELECTOR, ".memory") if m.is_displayed()]
        assert [m.find_element(By.CSS_SELECTOR, "blockquote").text for m in visible] == ["“old() is the fallback.”"]
        assert "1 of 4 memories shown" in driver.find_element(By.ID, "f-count").text
        assert not driver.find_element(By.ID, "group-fresh").is_displayed()
        Select(driver.find_element(By.ID, "f-outcome")).select_by_value("")
        Select(driver.find_element(By.ID, "f-project")).select_by_value("payments")
        shown = {m.get_attribute("data-project") for m in driver.find_elements(By.CSS_SELECTOR, ".memory")
                 if m.is_displayed()}
        assert shown == {"payments"} and "2 of 4" in driver.find_element(By.ID, "f-count").text
        Select(driver.find_element(By.ID, "f-project")).select_by_value("")
        driver.find_element(By.ID, "f-path").send_keys("notes")
        visible = [m for m in driver.find_elements(By.CSS_SELECTOR, ".memory") if m.is_displayed()]
        assert len(visible) == 1 and "Notes list b then c." in visible[0].text

        shot = tmp_path / "report.png"
        driver.find_element(By.ID, "f-path").clear()
        driver.execute_script("document.getElementById('f-path').dispatchEvent(new Event('input'))")
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        mine = []
        for e in driver.get_log("performance"):
            msg = json.loads(e["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent" and msg["params"]["documentURL"].startswith("file:"):
                mine.append(msg["params"]["request"]["url"])
        assert mine and all(u == report_file.as_uri() or u.startswith("data:") for u in mine), mine
    finally:
        driver.quit()


def test_report_as_markdown(make_repo, home, run_cli):
    r = make_repo("md")
    r.write("a.py", "def f():\n    return 1\n")
    r.commit("c1")
    index(r, home)
    cite(home, r, "a.py::f", text="f returns [one](http://x) <b>", topic="f")
    r.write("a.py", "def f():\n    return 2\n")
    r.commit("c2")
    index(r, home)
    p = run_cli("report", "--format", "markdown", cwd=r.root)
    assert p.returncode == 0, p.stderr
    md = p.stdout
    assert md.index("| stale | 1 |") < md.index("## stale (1)")
    assert "| changed | 1 |" in md and "changed: `a.py::f`" in md
    assert "<b>" not in md and r"\[one\]\(http://x\)" in md
