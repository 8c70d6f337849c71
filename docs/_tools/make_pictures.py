"""Make the documentation's pictures of the interactive page (run from the repository root).

``python docs/_tools/make_pictures.py shots``
    Screenshots with Debian's headless Chromium (tests/support/browser.py): the page of the
    showcase model (no GPU needed) with one node's details open -> docs/_static/graph_page.png;
    and, when docs/_static/profiled.html exists, the page of the profiled showcase graph
    coloured by GPU time -> docs/_static/graph_profile.png.
``python docs/_tools/make_pictures.py gpu``
    On a GPU machine: profile the showcase graph (``python -m pycudagraph show --profile``)
    and write docs/_static/profiled.html and docs/_static/profile_table.txt (the table
    ``str(profile)`` prints, with the GPU's name and the method).
``python docs/_tools/make_pictures.py startup [RESULT.json]``
    The serving page's start-up chart (docs/_tools/startup_chart.py) from what
    ``benchmarks/serve_startup.py --json`` wrote (default docs/results/serve_startup_h200.json)
    -> docs/_static/serve_startup.svg. No GPU needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "docs" / "_static"
sys.path.insert(0, str(ROOT))


def _shot(browser, page: Path, out: Path, select: str | None) -> None:
    tab = browser.open(page.as_uri())
    if select is not None:
        tab.eval(f"window.pcgPage.select({select!r})")
    tab.screenshot(out)
    tab.close()
    print(f"wrote {out}")


def shots() -> None:
    from pycudagraph.cli.show_model import showcase_model
    from pycudagraph.inspect.html import render_page
    from tests.support.browser import Browser, chromium_path
    path = chromium_path()
    if path is None:
        raise SystemExit("no Chromium here: apt-get install -y chromium")
    page = STATIC / "showcase_model.html"
    page.write_text(render_page(showcase_model()), encoding="utf-8")
    browser = Browser(path, width=1300, height=820)
    try:
        _shot(browser, page, STATIC / "graph_page.png", "3")
        profiled = STATIC / "profiled.html"
        if profiled.exists():
            _shot(browser, profiled, STATIC / "graph_profile.png", "3")
    finally:
        browser.close()
        page.unlink()


def gpu() -> None:
    import pycudagraph as pcg
    from pycudagraph.cli.show import build_showcase
    g, check, keep = build_showcase()
    stream = pcg.Stream()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert check(), "the showcase graph computed a wrong sum"
    p = exe.profile(stream, repeats=20)
    head = f"# {pcg.Device(0).name}, pycudagraph {pcg.__version__}, method {p.method}\n"
    (STATIC / "profile_table.txt").write_text(head + str(p) + "\n")
    g.to_html(STATIC / "profiled.html", profile=p, title="showcase graph, profiled")
    print(head + str(p))
    del keep


def startup() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from startup_chart import write
    result = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "docs" / "results" / \
        "serve_startup_h200.json"
    print(f"wrote {write(result, STATIC / 'serve_startup.svg')}")


if __name__ == "__main__":
    {"shots": shots, "gpu": gpu, "startup": startup}[sys.argv[1] if len(sys.argv) > 1 else "shots"]()
