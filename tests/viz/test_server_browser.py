"""The explorer end to end in headless Chromium: load the page, submit a sentence, see the
translation and a T_q x T_k heatmap with the right token labels; switching head changes it.

Needs chromium + chromedriver (scripts/setup-test-deps.sh) and selenium (the `test` extra). It
FAILS when they are missing, unless AIAYN_SKIP_BROWSER=1 says to skip on purpose.
"""

from __future__ import annotations

import os
import shutil

import pytest

from aiayn.viz.inspect import Inspector
from aiayn.viz.server import create_app
from tests.viz.test_attention import make_translation_folder
from tests.viz.test_server import serving

pytestmark = pytest.mark.slow
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000"]


def _browser(tmp_path):
    if os.environ.get("AIAYN_SKIP_BROWSER") == "1":
        pytest.skip("AIAYN_SKIP_BROWSER=1")
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        pytest.fail("chromium/chromedriver not found: run scripts/setup-test-deps.sh "
                    "(or set AIAYN_SKIP_BROWSER=1 to skip the browser tests)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    profile = tmp_path / "chrome-profile"
    profile.mkdir()
    opts.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(service=Service(driver), options=opts)


@pytest.fixture
def server(tmp_path):
    folder = make_translation_folder(tmp_path / "model", meta={"example": "the dog sat"})
    with serving(create_app(folder), threads=4) as port:
        yield folder, f"http://127.0.0.1:{port}/"


def test_explorer_in_headless_chromium(server, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    folder, url = server
    sentence = "the cat sat on the mat"
    expected = Inspector.load(folder).run(sentence, beam=4)
    browser = _browser(tmp_path)
    try:
        browser.get(url)
        wait = WebDriverWait(browser, 30)
        wait.until(lambda b: "transformer" in b.find_element(By.ID, "model-info").text)

        def cells():
            return browser.find_elements(By.CSS_SELECTOR, "#heatmap .cell")

        # The page opens with the folder's example already run, in cells larger than text.
        wait.until(lambda b: b.find_element(By.ID, "result").is_displayed())
        opening = Inspector.load(folder).run("the dog sat", beam=4)
        assert browser.find_element(By.ID, "text").get_attribute("value") == "the dog sat"
        assert browser.find_element(By.ID, "output").text == opening.output.strip()
        n_src = len(opening.labels["source"])
        assert len(cells()) == n_src * n_src and cells()[0].size["width"] >= 40
        browser.find_element(By.ID, "text").clear()
        browser.find_element(By.ID, "text").send_keys(sentence)
        browser.find_element(By.ID, "submit").click()
        wait.until(lambda b: b.find_element(By.ID, "output").text == expected.output.strip())

        def weights():
            return [c.get_attribute("data-w") for c in cells()]

        src, tgt = expected.labels["source"], expected.labels["target"]
        for kind, (q, k) in (("encoder", (src, src)), ("decoder_self", (tgt, tgt)),
                             ("cross", (tgt, src))):
            Select(browser.find_element(By.ID, "kind")).select_by_value(kind)
            assert len(cells()) == len(q) * len(k)
            qlabels = [e.get_attribute("textContent")
                       for e in browser.find_elements(By.CSS_SELECTOR, "#heatmap .qlabel")]
            klabels = [e.get_attribute("textContent")
                       for e in browser.find_elements(By.CSS_SELECTOR, "#heatmap .klabel")]
            assert (qlabels, klabels) == (q, k)
        # Layer 2, head 1 shows the model's weights; head 2 is a different picture.
        Select(browser.find_element(By.ID, "layer")).select_by_value("1")
        Select(browser.find_element(By.ID, "head")).select_by_value("0")
        head1 = weights()
        want = expected.maps[2].layers[1][0]
        assert [float(w) for w in head1] == pytest.approx(want.ravel().tolist(), abs=1e-4)
        Select(browser.find_element(By.ID, "head")).select_by_value("1")
        head2 = weights()
        assert head2 != head1 and len(head2) == len(head1)
        # Hovering a cell highlights its row and column.
        ActionChains(browser).move_to_element(cells()[len(src) + 1]).perform()
        lit = browser.find_elements(By.CSS_SELECTOR, "#heatmap .label.hl")
        assert sorted(e.get_attribute("textContent") for e in lit) == sorted([tgt[1], src[1]])
        assert len(browser.find_elements(By.CSS_SELECTOR, "#heatmap .cell.hl")) == len(tgt) + len(src) - 1
        shot = tmp_path / "explorer.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        # An over-long input is refused with a message on the page, not a crash.
        browser.execute_script("document.getElementById('text').removeAttribute('maxlength')")
        browser.find_element(By.ID, "text").send_keys("x" * 600)
        browser.find_element(By.ID, "submit").click()
        wait.until(lambda b: b.find_element(By.ID, "error").is_displayed())
        assert "the limit is 500" in browser.find_element(By.ID, "error").text
    finally:
        browser.quit()
