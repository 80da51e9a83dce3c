"""The session report in headless Chromium, offline: what the fast and the full report
tests both check. Chromium is Debian's ``chromium``; without it a local run skips, and a
CI run (``CI=true``) fails, so a green CI always means the report was rendered and clicked."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

# The flags of a quiet, throw-away browser: no sandbox (containers), no GPU, nothing fetched
# or updated in the background, no first-run pages; the profile is an empty folder per test.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    """Chromium's path; skips without it, or fails under CI=true."""
    path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    missing = "" if path else "no chromium on PATH (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = missing or "playwright is not installed (pip install -e '.[dev]')"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the report cannot be rendered: {missing}")
        pytest.skip(missing)
    assert path is not None
    return path


def check_report(run_dir: Path, profile: Path, screenshots: Path | None = None) -> None:
    """Open ``run_dir/report.html`` with the network blocked: one drawn node per candidate,
    the improvement curve, the CPU note, and a click on the last node opens its panel."""
    from playwright.sync_api import sync_playwright

    lineage = json.loads((run_dir / "lineage.json").read_text())
    n = len(lineage["nodes"])
    profile.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(profile), executable_path=chromium(), headless=True,
                                                       args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            errors: list[str] = []
            fetched: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            def offline(route: object) -> None:
                url = route.request.url  # type: ignore[attr-defined]
                if url.startswith("file:"):
                    route.continue_()  # type: ignore[attr-defined]
                else:  # anything fetched from the network fails, and is noted
                    fetched.append(url)
                    route.abort()  # type: ignore[attr-defined]

            page.route("**/*", offline)
            page.goto((run_dir / "report.html").resolve().as_uri())
            # The tree: one drawn node per candidate, each with a visible circle.
            nodes = page.locator("#tree g.node")
            assert nodes.count() == n
            assert all(nodes.nth(i).locator("circle").bounding_box()["width"] > 4 for i in range(n))  # type: ignore[index]
            # The curve: a polyline with points.
            curve = page.locator("#curve-candidates polyline.curve")
            assert curve.count() == 1 and len(curve.get_attribute("points").split()) >= 2  # type: ignore[union-attr]
            assert curve.bounding_box()["width"] > 50  # type: ignore[index]
            assert "interpreter" in page.locator("#cpu-note").inner_text().lower()
            if screenshots is not None:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshots / "report.png"), full_page=False)
            # A click on a node opens that candidate's panel (source, verdict, diff, timings).
            target = lineage["nodes"][-1]["node_id"]
            panel = page.locator(f"#cand-{target}")
            assert not panel.is_visible()
            page.locator(f'#tree g.node[data-cid="{target}"]').click()
            assert panel.is_visible() and f"Candidate {target}" in panel.inner_text()
            assert "verdict" in panel.inner_text() and panel.locator("pre.src").count() == 1
            if screenshots is not None:
                panel.screenshot(path=str(screenshots / "report-candidate.png"))
            assert not errors, errors
            assert not fetched, f"the report reached for the network: {fetched}"
        finally:
            context.close()
    if screenshots is not None:
        assert (screenshots / "report.png").stat().st_size > 10_000
