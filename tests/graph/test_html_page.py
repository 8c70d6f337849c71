"""The interactive page (Graph.to_html), on the CPU: its model read from a fake graph, the
page self-contained, and the page opened in a real headless Chromium (Debian's
``chromium``): it draws every node, search finds a kernel, a click shows its arguments,
bodies collapse, and 10,000 nodes open in a few seconds. Without Chromium the browser
tests skip, saying so."""

import json
import re
import time

import pytest

import pycudagraph as pcg
from pycudagraph.cli.show_model import showcase_model
from pycudagraph.inspect import page_model
from pycudagraph.inspect.html import render_page

from tests.support.browser import Browser, chromium_path
from tests.support.page_models import FakeProfile, Finding, big_model, png_colours, sample_graph


@pytest.fixture
def fake_model():
    g, n = sample_graph()
    prof = FakeProfile({n["axpy"]: 12.5, n["gemm"]: 40.0, n["step"]: 3.0, n["loop"]: 9.0},
                       total_us=80.0, critical=[n["axpy"], n["gemm"]])
    finds = [Finding(n["axpy"], "arg 1", 0x7F0000001000, "freed")]
    return page_model.graph_model(g, prof, finds, title="sample </script> graph"), n


def test_the_model_holds_every_node_with_its_parameters(fake_model):
    model, _ = fake_model
    nodes = model["nodes"]
    assert len(nodes) == 11  # 7 top-level, 2 in the child graph, 2 in the while body
    assert model["graphs"]["root"]["nodes"] == [str(i) for i in range(7)]
    assert nodes["3"]["bodies"] == [{"name": "child", "graph": "3/child"}]
    assert nodes["4"]["bodies"] == [{"name": "body", "graph": "4/body"}]
    assert model["graphs"]["4/body"]["nodes"] == ["4/body/0", "4/body/1"]
    assert ["1", "2", "programmatic"] in model["graphs"]["root"]["edges"]
    axpy = nodes["1"]
    assert axpy["args"] == [["y", "0x7f0000002000", ""], ["x", "0x7f0000001000", ""],
                            ["a", "2.5", ""], ["n", "1024", ""]]
    assert ["grid", "(4, 1, 1)"] in axpy["details"]
    gemm = nodes["2"]  # captured: bytes by index, decoded
    assert gemm["args"][0][0] == "arg 0" and "u64 0x7f0000002000" in gemm["args"][0][2]
    assert "i32 1024" in gemm["args"][1][2] and "f32 0.5" in gemm["args"][2][2]
    assert "24-byte struct" in gemm["args"][3][2]
    assert ["mangled name", "_ZN7cutlass7Kernel2I...E"] in gemm["details"]
    copy = dict(map(tuple, nodes["0"]["details"]))
    assert copy["nbytes"] == "4.0 KiB (4096 B)" and copy["kind"] == "host->device"
    assert copy["dst"] == "0x7f0000001000"
    memset = dict(map(tuple, nodes["5"]["details"]))
    assert memset["bytes"] == "1.0 KiB (1024 B)"


def test_the_model_carries_profile_times_and_findings(fake_model):
    model, _ = fake_model
    nodes = model["nodes"]
    assert model["profile"]["total_us"] == 80.0 and model["profile"]["critical_path"] == ["1", "2"]
    assert nodes["2"]["time_us"] == 40.0 and nodes["2"]["share"] == 0.5
    assert nodes["4/body/0"]["time_us"] == 3.0 and nodes["0"]["time_us"] is None
    assert nodes["1"]["findings"] == [{"place": "arg 1", "address": "0x7f0000001000",
                                       "problem": "freed"}]
    assert model["findings"] == 1


def test_findings_and_profiles_are_checked():
    g, n = sample_graph()
    with pytest.raises(pcg.ArgumentError, match=r"\.node, \.place, \.address and \.problem"):
        page_model.graph_model(g, findings=["freed"])
    with pytest.raises(pcg.ArgumentError, match="not a node of this graph"):
        page_model.graph_model(g, findings=[Finding(object(), "src", 1, "freed")])
    with pytest.raises(pcg.ArgumentError, match="what GraphExec.profile returned"):
        page_model.graph_model(g, profile={"axpy": 1.0})


def test_the_page_is_one_self_contained_file(fake_model):
    model, _ = fake_model
    page = render_page(model)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page, re.I)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)
    assert "{{" not in page and "/*{{" not in page
    data = re.search(r'<script type="application/json" id="pcg-data">(.*?)</script>', page, re.S)
    assert json.loads(data.group(1)) == model  # "</script>" in a title cannot end it early
    assert "<title>sample &lt;/script&gt; graph</title>" in page


def test_decoded_bytes():
    assert page_model.decode_bytes(bytes(8)).startswith("u64 0x0")
    assert page_model.decode_bytes((7).to_bytes(2, "little")) == "int 7"
    assert "96-byte struct" in page_model.decode_bytes(bytes(96)) and "..." in \
        page_model.decode_bytes(bytes(96))


# --- in a real browser -------------------------------------------------------------------

CHROMIUM = chromium_path()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium here: apt-get install -y chromium (Debian) to run the "
                             "page in a headless browser")


@pytest.fixture(scope="module")
def browser():
    b = Browser(CHROMIUM)
    yield b
    b.close()


@pytest.fixture
def open_page(browser, tmp_path):
    """open_page(model) -> a tab showing the model's page (closed after the test)."""
    tabs = []

    def open_(model, name="page.html"):
        path = tmp_path / name
        path.write_text(render_page(model), encoding="utf-8")
        tabs.append(browser.open(path.as_uri()))
        return tabs[-1]
    yield open_
    for tab in tabs:
        tab.close()


@needs_chromium
def test_the_page_draws_every_node(open_page, tmp_path, fake_model):
    model, _ = fake_model
    tab = open_page(model)
    assert tab.eval("document.querySelectorAll('g.node').length") == len(model["nodes"])
    assert tab.eval("document.body.dataset.nodes") == str(len(model["nodes"]))
    assert "11 nodes" in tab.eval("document.getElementById('stats').textContent")
    assert tab.eval("document.querySelectorAll('path.edge.port').length") == 1
    assert tab.eval("document.querySelectorAll('g.node.has-finding').length") == 1
    shot = tab.screenshot(tmp_path / "page.png", scale=0.25)
    assert png_colours(shot) > 20, "the screenshot is blank"


@needs_chromium
def test_search_finds_a_kernel_and_a_click_shows_its_arguments(open_page, tmp_path, fake_model):
    model, _ = fake_model
    tab = open_page(model)
    tab.click_on("#search")
    tab.type_text("axpy")
    assert tab.eval("document.getElementById('matches').textContent") == "1 match"
    assert tab.eval("[...document.querySelectorAll('g.node.match')].map(e => e.dataset.id)") == ["1"]
    tab.key("Enter", "Enter", 13)
    assert tab.eval("window.pcgPage.selected()") == "1"
    tab.eval("window.pcgPage.select(null); document.getElementById('panel').innerHTML = ''")
    tab.click_on('g.node[data-id="2"] rect.box')  # a real click on the captured gemm
    text = tab.eval("document.getElementById('panel').innerText")
    assert "cutlass::Kernel2" in text and "arg 0" in text and "u64 0x7f0000002000" in text
    assert "40.000 us" in text and "50.0%" in text
    tab.click_on('g.node[data-id="1"] rect.box')
    text = tab.eval("document.getElementById('panel').innerText")
    assert "0x7f0000002000" in text and "2.5" in text and "freed" in text


@needs_chromium
def test_bodies_collapse_and_open_again(open_page, tmp_path, fake_model):
    model, _ = fake_model
    tab = open_page(model)
    tab.click_on('[data-toggle="4"]')
    assert tab.eval("document.querySelectorAll('g.node').length") == len(model["nodes"]) - 2
    assert "2 nodes inside" in tab.eval("document.querySelector('g.node[data-id=\"4\"]').textContent")
    tab.eval("window.pcgPage.search('relax')")
    tab.eval("window.pcgPage.next()")  # a match inside a closed body opens it
    assert tab.eval("document.querySelectorAll('g.node').length") == len(model["nodes"])


@needs_chromium
def test_the_showcase_model_page(open_page, tmp_path):
    model = showcase_model()
    tab = open_page(model)
    assert tab.eval("document.querySelectorAll('g.node').length") == len(model["nodes"]) == 15


@needs_chromium
def test_ten_thousand_nodes_open_in_a_few_seconds(open_page, tmp_path):
    model = big_model(10_000)
    started = time.monotonic()
    tab = open_page(model, "big.html")
    took = time.monotonic() - started
    assert tab.eval("document.querySelectorAll('g.node').length") == 10_000
    assert took < 15.0, f"the 10,000-node page took {took:.1f} s to open"
    assert tab.eval("window.pcgPage.search('k42_17')") == 1


@needs_chromium
def test_a_long_chain_opens_at_its_start_readable_and_fit_shows_it_whole(open_page, fake_model):
    """A captured model is a chain of hundreds of kernels: fitted whole, each node would be a
    hairline. The page opens on its first nodes at a readable size; fit shows it whole."""
    tab = open_page(big_model(300, width=1), "chain.html")
    first, last = tab.eval("window.pcgPage.box('0')"), tab.eval("window.pcgPage.box('299')")
    height = tab.eval("window.innerHeight")
    assert first["h"] >= 0.45 * 38 and 0 <= first["y"] < height
    assert last["y"] > height  # below the window until fitted
    assert "its start shown; fit (f) shows all" in tab.eval(
        "document.getElementById('stats').textContent")
    tab.eval("window.pcgPage.fit()")
    assert tab.eval("window.pcgPage.scale()") < 0.45
    assert 0 <= tab.eval("window.pcgPage.box('299')")["y"] < height
    small = open_page(fake_model[0], "small.html")
    assert "its start shown" not in small.eval("document.getElementById('stats').textContent")


@needs_chromium
def test_a_library_kernel_shows_its_operation_and_a_long_name_its_last_scopes(open_page):
    from pycudagraph.cli.show_model import ModelBuilder
    from pycudagraph.inspect.page_model import with_mangled_name
    mangled = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15"
               "binary_internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_")
    b = ModelBuilder("library kernels")
    first = b.node("root", "kernel", "at::native::vectorized_elementwise_kernel")
    b.node("root", "kernel", "axpy", [first])
    anon = b.node("root", "kernel", "at::native::(anonymous namespace)::vectorized_layer_norm_"
                  "kernel", [first])
    with_mangled_name(b.model["nodes"][first], mangled)
    assert b.model["nodes"][first]["operation"] == "MulFunctor"
    tab = open_page(b.model)
    texts = tab.eval(f"[...document.querySelectorAll('g.node[data-id=\"{first}\"] text')]"
                     ".map(e => e.textContent)")
    assert texts == ["native::vectorized_elementwise_kernel", "MulFunctor"]
    # an anonymous namespace is a scope like any other: dropped before the name is cut
    texts = tab.eval(f"[...document.querySelectorAll('g.node[data-id=\"{anon}\"] text')]"
                     ".map(e => e.textContent)")
    assert texts[0] == "vectorized_layer_norm_kernel", texts
    tab.eval(f"window.pcgPage.select('{first}')")
    panel = tab.eval("document.getElementById('panel').innerText")
    assert "MulFunctor" in panel and mangled in panel
    assert tab.eval("window.pcgPage.search('mulfunctor')") == 1  # the mangled name is searched
