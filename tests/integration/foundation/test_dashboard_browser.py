"""The dashboard in a real headless Chromium against a real uvicorn control plane (Playwright, Debian's chromium)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fnd_helpers import insert_run_with_epochs, sample_summary, served_control_plane
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.epochs import EpochPhase
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import epochs as epoch_repo
from genenv.settings import GenEnvSettings

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "dashboard-token"
SCREENSHOT = Path("/tmp/genenv-dashboard.png")
HOSTILE_NAME = '<img src=x onerror="document.title=1">run'
P_HAT_PATH = "figure[data-chart=p_hat] path.series"


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Debian chromium driven by Playwright (never Playwright's own browser download)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed (pip install playwright; never `playwright install`)"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def db_file_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'dashboard.db'}"
    upgrade(url)
    return url


@pytest.fixture
def sessions(db_file_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on the same database the served control plane reads (rows go in through the repositories)."""
    engine = make_engine(GenEnvSettings(database={"url": db_file_url}).database)
    yield make_session_factory(engine)
    engine.dispose()


def _points(d: str) -> int:
    return len(re.findall(r"[ML]-?\d", d))


def test_dashboard_draws_the_curves_and_follows_a_running_run(
    browser: Any, db_file_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    from playwright.sync_api import expect  # present: the browser fixture skips otherwise

    with session_scope(sessions) as s:
        run_id = insert_run_with_epochs(s, name=HOSTILE_NAME, closed=4)
        insert_run_with_epochs(s, name="other run", closed=1)

    with served_control_plane(db_file_url, TOKEN, tmp_path / "server.log") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        page.goto(f"{url}/dashboard#token={TOKEN}&run={run_id}")
        page.wait_for_selector(P_HAT_PATH)
        path = page.locator(P_HAT_PATH)
        assert path.get_attribute("data-points") == "4" and _points(path.get_attribute("d") or "") == 4
        assert page.locator("figure[data-chart=p_hat] circle").count() == 4
        band = page.locator("figure[data-chart=p_hat] rect.band")
        assert float(band.get_attribute("data-lo") or 0) == pytest.approx(0.4)
        assert float(band.get_attribute("data-hi") or 0) == pytest.approx(0.6)
        for chart, series in (("lengths", 2), ("generations", 2), ("solved", 2), ("in_band", 1), ("benchmarks", 1)):
            assert page.locator(f"figure[data-chart={chart}] path.series").count() == series, chart
        assert page.locator("figure[data-chart=benchmarks] path.series").get_attribute("data-points") == "2"
        # Adapter versions and phase wall times: one row per epoch incl. the one in progress.
        rows = page.locator("#epoch-table tbody tr")
        assert rows.count() == 5
        assert rows.nth(3).locator("td").all_inner_texts()[:5] == ["3", "closed", "4", "4", "12.5"]
        assert rows.nth(4).locator("td").all_inner_texts()[:3] == ["4", "rollout", "—"]
        # The token left the address bar for localStorage; the run name was shown as text, not parsed as HTML.
        assert "token" not in page.url and f"run={run_id}" in page.url
        assert page.evaluate("localStorage.getItem('genenv.dashboard.token')") == TOKEN
        assert HOSTILE_NAME in page.locator("#run-title").inner_text()
        assert page.title() == "GenEnv · training dynamics" and page.locator("#run-title img").count() == 0
        assert page.locator("#run-list button").count() == 2

        # The run is running: the page polls, so a newly closed epoch appears without a reload.
        with session_scope(sessions) as s:
            epoch_repo.upsert(s, run_id, 4, phase=EpochPhase.CLOSED, summary=sample_summary(4))
        expect(path).to_have_attribute("data-points", "5", timeout=15_000)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
        assert problems == []

        # A fresh browser profile without the token is told to paste one, and pasting it loads the runs.
        context = browser.new_context()
        fresh = context.new_page()
        fresh.goto(f"{url}/dashboard")
        fresh.wait_for_selector("#status.error")
        assert "needs a valid bearer token" in fresh.locator("#status").inner_text()
        fresh.fill("#token-input", TOKEN)
        fresh.click("#token-form button[type=submit]")
        fresh.wait_for_selector("#run-list button")
        assert fresh.locator("#run-list button").count() == 2
        context.close()
