"""The dashboard in a real headless Chromium against a real uvicorn control plane (Playwright, Debian's chromium)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fnd_helpers import insert_run_with_epochs, sample_summary, served_control_plane
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import EpochRow, EvaluationRow, ExperimentRow, RunRow, TaskRow
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
# The report's mode colours (genenv.experiments.figures.MODE_COLOURS) as the browser computes them.
MODE_RGB = {"genenv": "rgb(31, 119, 180)", "random_simulator": "rgb(255, 127, 14)"}


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


# An experiment's per-member numbers, epoch by epoch (None: no evaluation stored for that epoch):
# (mode, replicate) -> [(p̂, in-band share, held-out accuracy, generated tasks so far, response tokens, operand digits)]
EXPERIMENT_DATA: dict[tuple[str, int], list[tuple[float, float, float | None, int, float, int]]] = {
    ("genenv", 0): [(0.2, 0.0, 0.2, 8, 10.0, 1), (0.4, 0.5, 0.3, 16, 15.0, 2), (0.5, 1.0, 0.5, 24, 20.0, 3)],
    ("genenv", 1): [(0.3, 0.25, 0.4, 6, 12.0, 1), (0.6, 0.75, None, 12, 18.0, 2)],
    ("random_simulator", 0): [(0.1, 0.0, 0.1, 10, 30.0, 1), (0.3, 0.0, 0.2, 20, 40.0, 1)],
    ("random_simulator", 1): [(0.3, 0.5, 0.3, 10, 34.0, 1), (0.2, 0.25, 0.4, 20, 44.0, 2)],
}
MEMBER_STATUS = {("genenv", 0): "completed", ("random_simulator", 0): "failed", ("genenv", 1): "running",
                 ("random_simulator", 1): "created"}
EXP_CHARTS = ["p_hat", "in_band", "heldout", "data_efficiency", "difficulty:has_mul", "difficulty:operand_digits",
              "difficulty:operators", "response_length"]


def _add_member_epoch(s: Session, run_id: str, epoch: int,
                      row: tuple[float, float, float | None, int, float, int]) -> None:
    p_hat, share, accuracy, tasks, tokens, digits = row
    summary = EpochSummary(p_hat=p_hat, in_band_share=share, generated_tasks_so_far=tasks, mean_response_tokens=tokens)
    s.add(EpochRow(run_id=run_id, index=epoch, phase=EpochPhase.CLOSED.value, summary=summary.model_dump(mode="json")))
    if accuracy is not None:
        s.add(EvaluationRow(run_id=run_id, epoch=epoch, benchmark="arithmetic", split="eval", n_items=4,
                            metrics={"overall": {"accuracy": accuracy}, "categories": {}}))
    # One valid task per epoch (its difficulty is the epoch's mean) and one rejected one, which does not count.
    s.add(TaskRow(run_id=run_id, epoch=epoch, seed_id="s", domain="arithmetic", variation=0, status="valid",
                  payload={"expression": "1 + 2", "max_digits": digits, "operators": 1}))
    s.add(TaskRow(run_id=run_id, epoch=epoch, seed_id="s", domain="arithmetic", variation=1, status="rejected",
                  payload=None, rejection_reason="not_json"))


def _means(page: Any, chart: str, mode: str) -> dict[int, tuple[float, float, int]]:
    """The mean points the page plotted: epoch -> (x, y, n) from the circles' data-* attributes."""
    dots = page.locator(f'figure[data-chart="{chart}"] circle.mean[data-mode="{mode}"]').evaluate_all(
        "ds => ds.map(d => [d.dataset.epoch, d.dataset.x, d.dataset.y, d.dataset.n])"
    )
    return {int(e): (float(x), float(y), int(n)) for e, x, y, n in dots}


def _ys(means: dict[int, tuple[float, float, int]]) -> dict[int, float]:
    return {epoch: y for epoch, (_, y, _) in means.items()}


def test_dashboard_draws_an_experiment_per_mode(
    browser: Any, db_file_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    from playwright.sync_api import expect  # present: the browser fixture skips otherwise

    with served_control_plane(db_file_url, TOKEN, tmp_path / "server.log") as url:
        body = {"name": HOSTILE_NAME, "modes": ["genenv", "random_simulator"], "replicates": 2,
                "template": {"name": "t", "epochs": 3, "seeds_per_epoch": 2, "eval_benchmarks": ["arithmetic"]}}
        created = httpx.post(f"{url}/v1/experiments", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
        assert created.status_code == 201, created.text
        exp = created.json()
        members = {(m["mode"], m["replicate"]): m["run_id"] for m in exp["members"]}
        assert set(members) == set(EXPERIMENT_DATA)
        with session_scope(sessions) as s:
            for key, rows in EXPERIMENT_DATA.items():
                for epoch, row in enumerate(rows):
                    _add_member_epoch(s, members[key], epoch, row)
                run = s.get(RunRow, members[key])
                assert run is not None
                run.status = MEMBER_STATUS[key]
                run.error = "boom" if MEMBER_STATUS[key] == "failed" else None
            s.add(EpochRow(run_id=members[("genenv", 1)], index=2, phase=EpochPhase.ROLLOUT.value))  # not closed
            stored = s.get(ExperimentRow, exp["id"])
            assert stored is not None
            stored.status = "running"  # started; its status is now read off the members

        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto(f"{url}/dashboard#token={TOKEN}&experiment={exp['id']}")
        page.wait_for_selector("#member-table tbody tr")
        assert page.locator("#run").is_hidden() and page.locator("#experiment").is_visible()
        assert "token" not in page.url and f"experiment={exp['id']}" in page.url

        # Every figure of the report, each with one mean curve per mode in that mode's colour.
        charts = page.locator("#experiment-charts figure").evaluate_all("fs => fs.map(f => f.dataset.chart)")
        assert sorted(charts) == sorted(EXP_CHARTS)
        for chart in EXP_CHARTS:
            for mode, rgb in MODE_RGB.items():
                line = page.locator(f'figure[data-chart="{chart}"] path.mean[data-mode="{mode}"]')
                assert line.count() == 1, (chart, mode)
                assert line.evaluate("e => getComputedStyle(e).stroke") == rgb, (chart, mode)
                assert line.evaluate("e => getComputedStyle(e).fill") == "none"
                dot = page.locator(f'figure[data-chart="{chart}"] circle.mean[data-mode="{mode}"]').first
                assert dot.evaluate("e => getComputedStyle(e).fill") == rgb
            assert page.locator(f'figure[data-chart="{chart}"] path.mean').count() == 2

        # The plotted means are the means over the replicates that have the number at that epoch (hand-computed).
        approx = pytest.approx
        assert _ys(_means(page, "p_hat", "genenv")) == approx({0: 0.25, 1: 0.5, 2: 0.5})
        assert _ys(_means(page, "p_hat", "random_simulator")) == approx({0: 0.2, 1: 0.25})
        assert {e: n for e, (_, _, n) in _means(page, "p_hat", "genenv").items()} == {0: 2, 1: 2, 2: 1}
        assert _ys(_means(page, "in_band", "genenv")) == approx({0: 0.125, 1: 0.625, 2: 1.0})
        assert _ys(_means(page, "heldout", "genenv")) == approx({0: 0.3, 1: 0.3, 2: 0.5})  # r1 has no eval at 1
        assert _ys(_means(page, "heldout", "random_simulator")) == approx({0: 0.2, 1: 0.3})
        # Data efficiency: x is the mean generated tasks over every replicate at that epoch, y the mean accuracy.
        assert _means(page, "data_efficiency", "genenv") == {0: approx((7.0, 0.3, 2)), 1: approx((14.0, 0.3, 1)),
                                                             2: approx((24.0, 0.5, 1))}
        assert _means(page, "data_efficiency", "random_simulator") == {0: approx((10.0, 0.2, 2)),
                                                                       1: approx((20.0, 0.3, 2))}
        assert _ys(_means(page, "difficulty:operand_digits", "genenv")) == approx({0: 1.0, 1: 2.0, 2: 3.0})
        assert _ys(_means(page, "difficulty:operand_digits", "random_simulator")) == approx({0: 1.0, 1: 1.5})
        assert _ys(_means(page, "difficulty:has_mul", "genenv")) == approx({0: 0.0, 1: 0.0, 2: 0.0})
        assert _ys(_means(page, "response_length", "random_simulator")) == approx({0: 32.0, 1: 42.0})
        # The mean line goes through its points; each replicate is its own faint trace.
        p_hat_mean = page.locator('figure[data-chart="p_hat"] path.mean[data-mode="genenv"]')
        assert p_hat_mean.get_attribute("data-points") == "3" and _points(p_hat_mean.get_attribute("d") or "") == 3
        replicates = page.locator('figure[data-chart="p_hat"] path.replicate')
        assert replicates.count() == 4
        assert page.locator('figure[data-chart="p_hat"] g[data-mode="genenv"] circle.replicate').count() == 5
        assert float(replicates.first.evaluate("e => getComputedStyle(e).strokeOpacity")) < 1

        # The α ± k_min band on the p̂ chart only (α = 0.5, k_min = 0.1 by default).
        band = page.locator('figure[data-chart="p_hat"] rect.band')
        assert band.count() == 1 and page.locator("#experiment-charts rect.band").count() == 1
        assert float(band.get_attribute("data-lo") or 0) == approx(0.4)
        assert float(band.get_attribute("data-hi") or 0) == approx(0.6)
        assert float(band.get_attribute("height") or 0) > 0

        # The legend names the modes in their colours; the members table lists all four members.
        legend = page.locator("#experiment-legend li[data-mode]")
        assert legend.all_inner_texts() == ["genenv (n = 2)", "random_simulator (n = 2)"]
        for i, rgb in enumerate(MODE_RGB.values()):
            assert legend.nth(i).locator("rect").evaluate("e => getComputedStyle(e).fill") == rgb
        assert page.locator('#experiment-legend li[data-legend="band"]').count() == 1
        rows = page.locator("#member-table tbody tr")
        assert rows.count() == 4
        cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(4)]
        assert [(c[0], c[1], c[3], c[4], c[6]) for c in cells] == [
            ("genenv", "0", "completed", "3/3", "—"), ("random_simulator", "0", "failed", "2/3", "boom"),
            ("genenv", "1", "running", "2/3", "—"), ("random_simulator", "1", "created", "2/3", "—"),
        ]
        # The name is text, never HTML; the experiment is running, shown in the title and the list.
        assert page.locator("#experiment-title").inner_text() == f"{HOSTILE_NAME} · running"
        assert page.locator("#experiment img").count() == 0 and page.title() == "GenEnv · training dynamics"
        listed = page.locator("#experiment-list button")
        assert listed.count() == 1 and listed.get_attribute("data-experiment-id") == exp["id"]
        assert "selected" in (listed.get_attribute("class") or "")

        # A running experiment is polled: a newly closed epoch moves the mean without a reload.
        with session_scope(sessions) as s:
            _add_member_epoch(s, members[("random_simulator", 1)], 2, (0.45, 1.0, 0.5, 30, 50.0, 2))
        random_p_hat = page.locator('figure[data-chart="p_hat"] path.mean[data-mode="random_simulator"]')
        expect(random_p_hat).to_have_attribute("data-points", "3", timeout=15_000)
        assert _ys(_means(page, "p_hat", "random_simulator")) == approx({0: 0.2, 1: 0.25, 2: 0.45})
        page.screenshot(path=str(SCREENSHOT.with_name("genenv-dashboard-experiment.png")), full_page=True)

        # A member's run opens in the unchanged run view; the experiment list leads back.
        rows.nth(0).locator("button.open-run").click()
        page.wait_for_selector(P_HAT_PATH)
        assert page.locator("#experiment").is_hidden() and page.locator("#run").is_visible()
        assert f"run={members[('genenv', 0)]}" in page.url and "experiment=" not in page.url
        expect(page.locator(P_HAT_PATH)).to_have_attribute("data-points", "3")
        page.locator("#experiment-list button").click()
        expect(page.locator("#experiment")).to_be_visible()
        assert f"experiment={exp['id']}" in page.url and page.locator("#run").is_hidden()
        assert problems == []


HOSTILE_PAYLOAD = '<img src=x onerror="document.title=2">'
FILLER_TASKS = 20  # with the two below, epoch 1 holds 22 tasks: a full first page (20) and a second one of 2


def _seed_tasks(s: Session, run_id: str) -> dict[str, Any]:
    """Epoch 1: a valid task with three judged attempts and its ledger row, a rejected one, and fillers; epoch 0:
    one valid task."""
    from genenv.db.models import RolloutRow, TaskStatRow, VerdictRow

    def task(epoch: int, variation: int, **fields: Any) -> int:
        row = TaskRow(run_id=run_id, epoch=epoch, seed_id="arith-1d-add-0001", domain="arithmetic",
                      variation=variation, **fields)
        s.add(row)
        s.flush()
        return int(row.id)

    solved = task(1, 0, status="valid", generator_adapter="simulator-v2", completion_tokens=17,
                  payload={"expression": "2 + 3", "note": HOSTILE_PAYLOAD})
    rejected = task(1, 1, status="rejected", payload=None, rejection_reason="not_json",
                    rejection_detail="Expecting value: line 1 column 1")
    fillers = [task(1, 2 + i, status="valid", payload={"expression": f"{i} + 1"}) for i in range(FILLER_TASKS)]
    other_epoch = task(0, 0, status="valid", payload={"expression": "1 + 1"})
    attempts = [RolloutRow(task_id=solved, attempt=a, response=r, error=e)
                for a, (r, e) in enumerate([("5", None), ("five", None), (None, "timed out")])]
    s.add_all(attempts)
    s.flush()
    s.add_all([
        VerdictRow(rollout_id=attempts[0].id, valid=True, score=1.0, success=True),
        VerdictRow(rollout_id=attempts[1].id, valid=True, score=0.0, success=False, error_kind="parse_error",
                   error_message="no integer in the reply"),
        VerdictRow(rollout_id=attempts[2].id, valid=False, score=None, success=False, error_kind="rollout_error",
                   error_message="timed out"),
        TaskStatRow(task_id=solved, n=2, k=1, p_hat=0.5, p_beta=0.5),
    ])
    return {"solved": solved, "rejected": rejected, "fillers": fillers, "other_epoch": other_epoch}


def test_dashboard_shows_the_tasks_of_an_epoch(
    browser: Any, db_file_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    from playwright.sync_api import expect  # present: the browser fixture skips otherwise

    with session_scope(sessions) as s:
        run_id = insert_run_with_epochs(s, name="tasks run", closed=2)
        ids = _seed_tasks(s, run_id)

    with served_control_plane(db_file_url, TOKEN, tmp_path / "server.log") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto(f"{url}/dashboard#token={TOKEN}&run={run_id}")
        page.wait_for_selector(P_HAT_PATH)

        # The run view links every epoch's tasks; the link opens the tasks view of that epoch.
        assert page.locator("#epoch-table a.tasks-link").count() == 3
        page.locator('#epoch-table a.tasks-link[data-epoch="1"]').click()
        page.wait_for_selector("#task-list li.task")
        assert page.locator("#run").is_hidden() and page.locator("#tasks").is_visible()
        assert f"run={run_id}" in page.url and "tasks=1" in page.url
        assert page.locator("#tasks-epoch").input_value() == "1"
        assert page.locator("#tasks-title").inner_text() == "Generated tasks · tasks run"

        # The first page: 20 of 22 tasks, in id order, and a "More" button.
        items = page.locator("#task-list > li")
        assert items.count() == 20 and page.locator("#tasks-more").is_visible()

        # The valid task: its p̂ from the ledger, its attempts with their verdicts, its payload as text.
        solved = page.locator(f'#task-list li[data-task-id="{ids["solved"]}"]')
        p_hat = solved.locator(".p-hat")
        assert p_hat.get_attribute("data-p-hat") == "0.5" and "p̂ 0.500 (1 of 2" in p_hat.inner_text()
        rows = solved.locator("table.attempts tbody tr")
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.verdict)") == ["success", "fail", "invalid"]
        cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(3)]
        assert cells == [["0", "success", "1", "5", "—"],
                         ["1", "fail", "0", "five", "parse_error: no integer in the reply"],
                         ["2", "invalid", "—", "—", "rollout_error: timed out"]]
        payload = json.loads(solved.locator("pre.payload").inner_text())  # shown as JSON text, never as HTML
        assert payload == {"expression": "2 + 3", "note": HOSTILE_PAYLOAD}
        assert "simulator-v2" in solved.inner_text() and "17 tokens" in solved.inner_text()
        assert page.locator("#tasks img").count() == 0 and page.title() == "GenEnv · training dynamics"

        # The rejected task: its reason and detail, no attempts.
        rejected = page.locator(f'#task-list li[data-task-id="{ids["rejected"]}"]')
        assert rejected.locator(".rejection").get_attribute("data-reason") == "not_json"
        assert rejected.locator(".rejection").inner_text() == "rejected: not_json — Expecting value: line 1 column 1"
        assert rejected.locator("table.attempts").count() == 0
        page.screenshot(path=str(SCREENSHOT.with_name("genenv-dashboard-tasks.png")), full_page=True)

        # "More" asks the API for the next page by its cursor and appends it; then there is nothing more.
        with page.expect_request(lambda r: "/tasks?" in r.url and "cursor=" in r.url) as more:
            page.click("#tasks-more")
        assert "epoch=1" in more.value.url
        expect(items).to_have_count(22)
        expect(page.locator("#tasks-more")).to_be_hidden()
        shown = [int(i) for i in items.evaluate_all("ls => ls.map(l => l.dataset.taskId)")]
        assert shown == sorted([ids["solved"], ids["rejected"], *ids["fillers"]])

        # The filter: rejected only (in the address too), then another epoch.
        page.select_option("#tasks-status", "rejected")
        expect(items).to_have_count(1)
        assert items.first.get_attribute("data-task-id") == str(ids["rejected"]) and "status=rejected" in page.url
        assert page.locator("#tasks-more").is_hidden()
        page.select_option("#tasks-status", "")
        expect(items).to_have_count(20)
        page.select_option("#tasks-epoch", "0")
        expect(items).to_have_count(1)
        assert items.first.get_attribute("data-task-id") == str(ids["other_epoch"]) and "tasks=0" in page.url
        assert "not scored yet" in items.first.locator(".p-hat").inner_text()

        # Back to the run's curves.
        page.click("#tasks-back")
        expect(page.locator("#run")).to_be_visible()
        assert page.locator("#tasks").is_hidden() and "tasks=" not in page.url
        assert problems == []
