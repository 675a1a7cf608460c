"""The canvas editor's weight and time to first draw: `python bench/canvas.py`.

    .venv/bin/python bench/canvas.py [--nodes 50] [--rounds 7]

Starts the service as the README's first command does (uvicorn, SQLite, DEBUG on) on a
throwaway database holding one workflow of `--nodes` nodes (an entry, transforms, switches
that branch and join, an exit), and loads its pages in Debian's chromium (Playwright),
alternately, `--rounds` times each:

- the canvas editor (`/admin/graphs/workflow/<id>/canvas/`): first draw is the time from the
  start of navigation to the graph drawn on the canvas (the page's `canvas-drawn` mark, set
  once the workflow's JSON is read and laid out); checked, to its first validation answer;
- the peer: the workflow's change page, whose graph the server draws as SVG
  (`/admin/graphs/workflow/<id>/change/`): first draw is DOMContentLoaded (its SVG is in the
  HTML).

Page weight is every response the page loads (HTML, CSS, scripts, JSON), as sent here
(DEBUG serves static files uncompressed), and gzipped as a production start with
collectstatic sends them (WhiteNoise's compressed storage). Medians; ratios canvas / change
page.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
PASSWORD = "bench-canvas-password"


def graph_yaml(count: int) -> str:
    """A workflow of `count` nodes: entry, then groups of a switch with two transforms that
    join on the next, then an exit; every node on a path from the entry."""
    nodes: list[dict[str, Any]] = [{"id": "entry", "type": "entry", "next": "n1"}]
    index = 1
    while len(nodes) < count - 1:
        left = count - 1 - len(nodes)
        after = f"n{index + 3}" if left > 3 else "exit"
        if left >= 3:
            nodes += [
                {
                    "id": f"n{index}",
                    "type": "switch",
                    "conditions": [
                        {"rule": {">": [{"var": "$.entry.x"}, index]}, "target": f"n{index + 1}"}
                    ],
                    "default": f"n{index + 2}",
                },
                {
                    "id": f"n{index + 1}",
                    "type": "transform",
                    "transform": {"expr": f"$.entry.x + {index}"},
                    "next": after,
                },
                {
                    "id": f"n{index + 2}",
                    "type": "transform",
                    "transform": {"expr": f"$.entry.x - {index}"},
                    "next": after,
                },
            ]
            index += 3
        else:
            nodes.append(
                {
                    "id": f"n{index}",
                    "type": "transform",
                    "transform": {"expr": "$.entry.x"},
                    "next": f"n{index + 1}" if left > 1 else "exit",
                }
            )
            index += 1
    nodes.append({"id": "exit", "type": "exit"})
    document = {
        "version": "1.0",
        "server": {"name": "bench", "version": "1.0.0"},
        "tools": [
            {
                "name": "wide",
                "description": f"{count} nodes",
                "inputSchema": {"type": "object", "properties": {"x": {"type": "number"}}},
                "nodes": nodes,
            }
        ],
    }
    return json.dumps(document)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )


def prepared(env: dict[str, str], folder: Path, nodes: int) -> None:
    manage(env, "migrate", "--verbosity", "0")
    graph = folder / "wide.yaml"
    graph.write_text(graph_yaml(nodes))
    manage(env, "import_graph", str(graph))
    script = (
        "from django.contrib.auth import get_user_model;"
        f"get_user_model().objects.create_superuser('bench', password='{PASSWORD}')"
    )
    manage(env, "shell", "-c", script)


def served(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=1)
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the server did not start")


def measure(page: Any, url: str, view: dict[str, str]) -> dict[str, float]:
    """One load of `url`: when its graph was drawn and first checked (ms from the start of
    navigation, as `view` reads them), and the bytes of every response."""
    sizes: list[tuple[int, int]] = []

    def counted(response: Any) -> None:
        try:
            body = response.body()
        except Exception:  # a redirect has no body
            return
        sizes.append((len(body), len(gzip.compress(body, 6))))

    page.on("response", counted)
    page.goto(url, wait_until="load")
    page.wait_for_function(view["ready"])
    page.wait_for_load_state("networkidle")
    page.remove_listener("response", counted)
    return {
        "drawn": float(page.evaluate(view["drawn"])),
        "checked": float(page.evaluate(view["checked"])),
        "bytes": float(sum(raw for raw, _ in sizes)),
        "gzipped": float(sum(packed for _, packed in sizes)),
        "requests": float(len(sizes)),
    }


CANVAS = {
    "ready": "performance.getEntriesByName('canvas-checked').length > 0",
    "drawn": "performance.getEntriesByName('canvas-drawn')[0].startTime",
    "checked": "performance.getEntriesByName('canvas-checked')[0].startTime",
}
_LOADED = "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
CHANGE_PAGE = {"ready": _LOADED + " > 0", "drawn": _LOADED, "checked": _LOADED}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-canvas-"))
    port = free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}", "DEBUG": "true"}
    prepared(env, folder, options.nodes)
    server = served(env, port)
    base = f"http://127.0.0.1:{port}"
    results: dict[str, list[dict[str, float]]] = {"canvas": [], "change page": []}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            login = browser.new_context().new_page()
            login.goto(f"{base}/admin/login/")
            login.fill("#id_username", "bench")
            login.fill("#id_password", PASSWORD)
            login.click("input[type=submit]")
            login.wait_for_selector("#site-name")
            signed_in = login.context.storage_state()
            canvas_url = f"{base}/admin/graphs/workflow/1/canvas/"
            change_url = f"{base}/admin/graphs/workflow/1/change/"

            def cold(url: str, view: dict[str, str]) -> dict[str, float]:
                # A new context each load: nothing cached, every byte the page needs counted.
                context = browser.new_context(
                    storage_state=signed_in, viewport={"width": 1400, "height": 1000}
                )
                try:
                    return measure(context.new_page(), url, view)
                finally:
                    context.close()

            cold(canvas_url, CANVAS)  # warm the server: first compiles, caches
            cold(change_url, CHANGE_PAGE)
            for _ in range(options.rounds):
                results["canvas"].append(cold(canvas_url, CANVAS))
                results["change page"].append(cold(change_url, CHANGE_PAGE))
            page = login.context.new_page()
            measure(page, canvas_url, CANVAS)
            drawn_nodes = page.evaluate("SwitchyardCanvas.graph.nodes().length")
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    medians = {
        name: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        for name, runs in results.items()
    }
    print(f"{options.nodes}-node workflow ({drawn_nodes} drawn on the canvas), cold cache,")
    print(f"medians of {options.rounds} loads each")
    header = ("page", "first draw ms", "checked ms", "requests", "KB as sent", "KB gzipped")
    print("{:<12} {:>13} {:>11} {:>8} {:>11} {:>11}".format(*header))
    for name, median in medians.items():
        print(
            f"{name:<12} {median['drawn']:>13.0f} {median['checked']:>11.0f} "
            f"{median['requests']:>8.0f} {median['bytes'] / 1024:>11.1f} "
            f"{median['gzipped'] / 1024:>11.1f}"
        )
    canvas, peer = medians["canvas"], medians["change page"]
    print(
        f"ratio canvas / change page: first draw {canvas['drawn'] / peer['drawn']:.2f}, "
        f"weight as sent {canvas['bytes'] / peer['bytes']:.2f}, "
        f"gzipped {canvas['gzipped'] / peer['gzipped']:.2f}"
    )


if __name__ == "__main__":
    main()
