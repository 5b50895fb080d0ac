"""Check, in a real headless browser, that the Prefect UI shows a solforge campaign and its artifacts.

Not part of the pytest suite (CI has no browser): a documented check, recorded in docs/BENCHMARKS.md.

What it does:

1. starts ``solforge serve --no-deploy`` (the local Prefect server + UI + a process worker) on a free port,
   with its state (PREFECT_HOME) and the results under a temporary directory;
2. runs a short real campaign against it on the CPU:
   ``solforge run tests/fixtures/problems --device cpu --max-candidates 2 --iterations 3 --run-id uicheck-...``
   (about a minute on 2 cores);
3. asks the Prefect API for the campaign's flow run, its ``report`` subflow run and the artifacts
   ``results-<run_id>`` (table), ``report-<run_id>`` (markdown) and ``progress-<run_id>`` (markdown);
4. opens the UI in headless Chromium and asserts in the DOM:
   - the campaign flow run page shows the flow run's name, the state "Completed", the flow "campaign" and
     its subflow runs ``campaign-rounds`` and ``report``;
   - the Artifacts tab of the ``report`` subflow run lists ``results-<run_id>`` and ``report-<run_id>``;
   - the artifacts page lists all three keys;
   - the markdown report artifact renders the table with the problem name and the aggregates;
   - no page shows Prefect's "Can't connect to Server API" / "Something went wrong" errors;
5. saves three PNG screenshots (prefect_ui_flow_run.png, prefect_ui_artifacts.png, prefect_ui_report.png)
   into --out (default docs/img/), and stops everything it started.

The browser is not a project dependency. Set it up once, outside .venv:

    apt-get install -y chromium                       # or any Chromium/Chrome; SOLFORGE_BROWSER=/path/to/it
    python3 -m venv /tmp/uivenv && /tmp/uivenv/bin/pip install playwright

and run, from the repository root (the project itself runs from .venv/bin/solforge):

    /tmp/uivenv/bin/python bench/prefect_ui_check.py --out docs/img

Exit codes: 0 all assertions held, 1 an assertion failed (the message says which; the screenshots taken so
far and a failure screenshot are still written), 2 no browser / no playwright / no solforge, 3 the campaign
or the server failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from solforge.prefect_env import wait_healthy  # noqa: E402  (stdlib only: runs in the browser's venv)

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")
UI_ERRORS = ("Can't connect to Server API", "Something went wrong")


class CheckFailed(AssertionError):
    pass


class NoBrowser(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[prefect-ui-check] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_browser(explicit: str | None) -> str | None:
    """The Chromium to drive: --browser, SOLFORGE_BROWSER, then one on PATH; None: playwright's own (if any)."""
    for cand in (explicit, os.environ.get("SOLFORGE_BROWSER")):
        if cand:
            path = shutil.which(cand) or cand
            if not Path(path).exists():
                raise NoBrowser(f"browser {cand!r} not found")
            return path
    for name in BROWSER_NAMES:
        if found := shutil.which(name):
            return found
    return None


def launch_browser(pw, executable: str | None):  # noqa: ANN001, ANN201 - playwright objects
    try:
        return pw.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
    except Exception as e:  # noqa: BLE001 - any launch failure means: no usable browser
        raise NoBrowser(
            f"no usable headless browser ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}).\n"
            "Install one (apt-get install -y chromium) or point SOLFORGE_BROWSER / --browser at a Chromium or "
            "Chrome executable."
        ) from None


# ---------------------------------------------------------------- Prefect API (plain HTTP, no prefect import)


def api_post(api: str, path: str, body: dict) -> list | dict:
    req = urllib.request.Request(f"{api}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def campaign_runs(api: str, run_id: str) -> dict:
    """The campaign flow run, its subflow runs by flow name, and the run's artifacts by key."""
    flows = {f["id"]: f["name"] for f in api_post(api, "/flows/filter", {})}
    runs = api_post(api, "/flow_runs/filter", {})
    by_flow: dict[str, list[dict]] = {}
    for r in runs:
        by_flow.setdefault(flows.get(r["flow_id"], "?"), []).append(r)
    top = [r for r in by_flow.get("campaign", []) if not r.get("parent_task_run_id")]
    if len(top) != 1:
        raise CheckFailed(f"expected one top-level 'campaign' flow run in the API, found {len(top)}")
    artifacts = api_post(api, "/artifacts/filter", {"artifacts": {"key": {"like_": run_id}}})
    return {"campaign": top[0], "by_flow": by_flow, "artifacts": {a["key"]: a for a in artifacts if a.get("key")}}


# ---------------------------------------------------------------- the server and the campaign


def start_serve(solforge: str, data_dir: Path, port: int, log_path: Path) -> subprocess.Popen:
    env = os.environ.copy()
    for k in [k for k in env if k.startswith("PREFECT_")]:
        env.pop(k)  # a PREFECT_API_URL / PREFECT_HOME of the caller must not leak into this check
    # No UI API URL is set here on purpose: `solforge serve` must point the UI at its own port (Prefect 3.9
    # defaults the UI to port 4200 whatever --port says), and this check fails if it does not.
    return subprocess.Popen(
        [solforge, "serve", "--no-deploy", "--data-dir", str(data_dir), "--port", str(port)],
        cwd=ROOT, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )


def stop_serve(proc: subprocess.Popen, data_dir: Path) -> None:
    """Ctrl-C twice (the Prefect worker asks for a second one), then kill; then the server by its pid file."""
    for sig, wait_s in ((signal.SIGINT, 20), (signal.SIGINT, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
    pid_file = data_dir / "prefect" / "server.pid"  # written by solforge.prefect_env.start_server
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"prefect" in cmdline and b"server" in cmdline:
        log(f"stopping the Prefect server left behind (pid {pid})")
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def run_campaign(solforge: str, api: str, data_dir: Path, args: argparse.Namespace, run_id: str, log_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_API_URL"] = api
    cmd = [solforge, "run", *args.problems, "--device", "cpu", "--max-candidates", str(args.max_candidates),
           "--iterations", "3", "--data-dir", str(data_dir), "--run-id", run_id, "--json"]
    log("running: " + " ".join(cmd))
    t0 = time.monotonic()
    with open(log_path, "wb") as err:
        p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, timeout=args.run_timeout)
    if p.returncode != 0:
        raise RuntimeError(f"solforge run exited with {p.returncode}; see {log_path}")
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    log(f"campaign {out['run_id']} done in {time.monotonic() - t0:.0f} s ({out.get('stop_reason')})")
    return out


# ---------------------------------------------------------------- the browser


def page_text(page) -> str:  # noqa: ANN001
    return page.inner_text("body")


def expect_text(page, text: str, where: str, timeout_ms: int = 20_000) -> None:  # noqa: ANN001
    try:
        page.get_by_text(text, exact=False).first.wait_for(state="visible", timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError
        body = page_text(page)
        raise CheckFailed(f"{where}: {text!r} is not shown (url {page.url}); page text starts: {body[:400]!r}") from None


def expect_no_ui_error(page, where: str) -> None:  # noqa: ANN001
    body = page_text(page)
    for err in UI_ERRORS:
        if err in body:
            raise CheckFailed(f"{where}: the UI shows an error {err!r} (url {page.url})")


def open_page(page, url: str) -> None:  # noqa: ANN001
    page.goto(url, wait_until="networkidle", timeout=60_000)


def settle(page) -> None:  # noqa: ANN001
    """Let charts and lazy panels finish drawing before a screenshot."""
    page.wait_for_load_state("networkidle", timeout=30_000)
    page.wait_for_timeout(1500)


def screenshot(page, where: str, path: Path) -> Path:  # noqa: ANN001
    """Check the page shows no UI error, let it settle, and save it to ``path``."""
    expect_no_ui_error(page, where)
    settle(page)
    page.screenshot(path=path)
    return path


def check_ui(ui: str, info: dict, run_id: str, problem_names: list[str], out_dir: Path, browser_path: str | None) -> list[Path]:
    from playwright.sync_api import sync_playwright

    shots: list[Path] = []
    top = info["campaign"]
    reports = [r for r in info["by_flow"].get("report", []) if r["state_name"] == "Completed"]
    if not reports:
        raise CheckFailed("the campaign has no completed 'report' subflow run in the API")
    report_run = reports[0]
    keys = {"results": f"results-{run_id}", "report": f"report-{run_id}", "progress": f"progress-{run_id}"}
    missing = [k for k in keys.values() if k not in info["artifacts"]]
    if missing:
        raise CheckFailed(f"artifacts missing in the API: {missing} (found {sorted(info['artifacts'])})")

    with sync_playwright() as pw:
        browser = launch_browser(pw, browser_path)
        log(f"browser: {browser_path or 'playwright chromium'} {browser.version}")
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            # 1. the campaign flow run: name, state, flow, subflow runs in the graph
            where = "campaign flow run page"
            open_page(page, f"{ui}/runs/flow-run/{top['id']}")
            expect_text(page, top["name"], where)
            expect_text(page, "Completed", where)
            # the run graph is a canvas: the subflow runs are asserted in the "Subflow Runs" tab's list
            page.get_by_text("Subflow Runs", exact=True).last.click()
            expect_text(page, "campaign-rounds", where)
            expect_text(page, report_run["name"], where)
            shots.append(screenshot(page, where, out_dir / "prefect_ui_flow_run.png"))
            log(f"asserted {where}: {top['name']!r} Completed with subflows campaign-rounds and report")

            # 2. the report subflow run's Artifacts tab: the table and the markdown report
            where = "report subflow run, Artifacts tab"
            open_page(page, f"{ui}/runs/flow-run/{report_run['id']}")
            expect_text(page, report_run["name"], where)
            expect_text(page, top["name"], where)  # "Parent Run" link
            page.get_by_text("Artifacts", exact=True).last.click()
            expect_text(page, keys["results"], where)
            expect_text(page, keys["report"], where)
            tab_text = page_text(page)
            for kind in ("TABLE", "MARKDOWN"):
                if kind.lower() not in tab_text.lower():
                    raise CheckFailed(f"{where}: no {kind} artifact card")
            shots.append(screenshot(page, where, out_dir / "prefect_ui_artifacts.png"))
            log(f"asserted {where}: {keys['results']} (table) and {keys['report']} (markdown)")

            # 3. the artifacts page lists all three keys (the progress one belongs to campaign-rounds)
            where = "artifacts page"
            open_page(page, f"{ui}/artifacts")
            for key in keys.values():
                expect_text(page, key, where)
            expect_no_ui_error(page, where)
            log(f"asserted {where}: {', '.join(keys.values())}")

            # 4. the table artifact renders its rows
            where = "results table artifact"
            open_page(page, f"{ui}/artifacts/artifact/{info['artifacts'][keys['results']]['id']}")
            for col in ("problem", "attempts", "passed", "best_sol_score", *problem_names):
                expect_text(page, col, where)
            expect_no_ui_error(page, where)
            log(f"asserted {where}: columns and rows {problem_names}")

            # 5. the markdown report renders as tables
            where = "markdown report artifact"
            open_page(page, f"{ui}/artifacts/artifact/{info['artifacts'][keys['report']]['id']}")
            expect_text(page, f"solforge run {run_id}", where)
            for text in (*problem_names, "best SOL score", "geomean_speedup", "median_sol_score"):
                expect_text(page, text, where)
            if page.locator("table").count() < 2:
                raise CheckFailed(f"{where}: the markdown tables are not rendered as <table> elements")
            shots.append(screenshot(page, where, out_dir / "prefect_ui_report.png"))
            log(f"asserted {where}: title, problem rows and aggregates rendered as tables")
        except CheckFailed:
            failed = out_dir / "prefect_ui_check_failed.png"
            page.screenshot(path=failed)
            log(f"failure screenshot: {failed}")
            raise
        finally:
            browser.close()
    return shots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"), help="where the PNG screenshots go")
    ap.add_argument("--problems", nargs="+", default=["tests/fixtures/problems"], help="problem dirs of the campaign")
    ap.add_argument("--max-candidates", type=int, default=2)
    ap.add_argument("--solforge", default=str(ROOT / ".venv" / "bin" / "solforge"), help="the solforge command")
    ap.add_argument("--browser", default=None, help="Chromium/Chrome executable (else SOLFORGE_BROWSER, PATH)")
    ap.add_argument("--port", type=int, default=0, help="port of the Prefect server/UI (0: a free one)")
    ap.add_argument("--run-timeout", type=float, default=300.0)
    ap.add_argument("--keep", action="store_true", help="keep the temporary data dir and logs")
    args = ap.parse_args()

    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        print("playwright is not importable by this Python. Run this check with a Python that has it, e.g.\n"
              "  python3 -m venv /tmp/uivenv && /tmp/uivenv/bin/pip install playwright\n"
              "  /tmp/uivenv/bin/python bench/prefect_ui_check.py", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    try:
        browser_path = find_browser(args.browser)  # None: playwright's own, if `playwright install` worked
        with sync_playwright() as pw:  # fail now, not after the campaign
            launch_browser(pw, browser_path).close()
    except NoBrowser as e:
        print(str(e), file=sys.stderr)
        return 2
    solforge = shutil.which(args.solforge) or args.solforge
    if not Path(solforge).exists():
        print(f"solforge not found at {solforge} (run scripts/setup.sh or pass --solforge)", file=sys.stderr)
        return 2

    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="solforge-ui-check-"))
    data_dir = tmp / "data"
    port = args.port or free_port()
    ui, api = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/api"
    run_id = "uicheck-" + datetime.now(timezone.utc).strftime("%Y%m%dt%H%M%S")
    log(f"temp dir {tmp}; starting solforge serve on port {port}")
    serve = start_serve(solforge, data_dir, port, tmp / "serve.log")
    rc = 0
    try:
        try:
            wait_healthy(api, serve, 180)
            out = run_campaign(solforge, api, data_dir, args, run_id, tmp / "run.log")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"FAILED before the browser: {e}")
            for name in ("serve.log", "run.log"):
                if (tmp / name).exists():
                    log(f"--- tail of {name}:\n" + (tmp / name).read_text(errors="replace")[-3000:])
            rc = 3
            return rc
        problem_names = [p["problem"] for p in out.get("problems", [])]
        if not problem_names:
            log("FAILED: the campaign reported no problem")
            rc = 3
            return rc
        info = campaign_runs(api, run_id)
        shots = check_ui(ui, info, run_id, problem_names, out_dir, browser_path)
        for s in shots:
            log(f"screenshot {s} ({s.stat().st_size // 1024} KiB)")
        log(f"OK: flow run {info['campaign']['name']!r} (run {run_id}) and its artifacts are shown in the UI")
    except CheckFailed as e:
        log(f"FAILED: {e}")
        rc = 1
    except NoBrowser as e:
        log(f"FAILED: {e}")
        rc = 2
    finally:
        stop_serve(serve, data_dir)
        if args.keep or rc:
            log(f"kept {tmp} (serve.log, run.log, data/)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
