"""The page of a graph file made from the file alone (inspect/file_page.py, ``show FILE
--model``), on the CPU: every node with the path a load would give, kernels of binary
records and of JSON records with their arguments and the slots their addresses point into,
nested graphs, edge ports, no CUDA call; the page drawn in headless Chromium."""

import json

import pytest

import pycudagraph as pcg
from pycudagraph.cli import main as cli
from pycudagraph.cli.path_info import node_counts
from pycudagraph.files import archive as files
from pycudagraph.files import save as file_save
from pycudagraph.inspect.file_page import file_model
from pycudagraph.inspect.html import render_page
from tests.graph.test_graph_files_bulk import encode, packed
from tests.graph.test_graph_files_named_kernels import named_manifest
from tests.graph.test_graph_files_named_kernels import packed as packed_named
from tests.graph.test_graph_files_walk import kernel, stand_ins  # noqa: F401 - fixtures
from tests.support.browser import Browser, chromium_path
from tests.support.file_fuzz import resealed


def test_a_chain_of_records_is_drawn_from_the_file_alone():
    gf = files.decode(encode(*packed(20)))
    with pcg.trace() as t:
        model = file_model(gf, "chain")
    assert t.calls == []
    root = model["graphs"]["root"]
    assert root["nodes"] == [str(i) for i in range(20)]
    assert root["edges"] == [[str(i), str(i + 1), "default"] for i in range(19)]
    first, second = model["nodes"]["0"], model["nodes"]["1"]
    assert (first["type"], first["label"], second["label"]) == ("kernel", "axpy", "scale")
    assert ["kernel", "module 'm.cu'"] in first["details"]
    assert ["grid", "(4, 1, 1)"] in first["details"] and ["block", "(128, 1, 1)"] in first["details"]
    assert first["args"][0] == ["bytes", "00" * 24, "24 bytes"]
    assert first["args"][1:] == [["byte 0", "slot y + 0x0", ""], ["byte 8", "slot x + 0x0", ""]]
    third = model["nodes"]["2"]  # each node's own relocations
    assert ["byte 0", "slot y + 0x8", ""] in third["args"]


def test_kernels_saved_by_name_show_each_argument():
    m, sections, version = packed_named(named_manifest(6))
    model = file_model(files.decode(files.encode(m, sections, version=version)))
    node = model["nodes"]["1"]
    assert node["label"] == "scale"
    assert node["details"][0] == ["mangled name", "_Z5scalePfi"] and "operation" not in node
    assert ["kernel", "saved by name: found in a library when loaded"] in node["details"]
    assert node["args"][0] == ["arg 0", "00" * 8, "slot y + 0xc"]
    assert node["args"][1][0] == "arg 1" and "f32 0.5" in node["args"][1][2]
    assert node["args"][2] == ["arg 2", "01000000", "i32 1"]


@pytest.fixture
def every_type(stand_ins):  # noqa: F811 - the fixture imported above
    saver = file_save._Saver(stand_ins.slots)
    gf = files.decode(files.encode(saver.run(stand_ins.root), saver.sections))
    return gf, file_model(gf, "every node type")


def test_every_node_type_and_nested_graph_is_drawn(every_type):
    gf, model = every_type
    nodes, graphs = model["nodes"], model["graphs"]
    types = [n["type"] for n in gf.manifest["root"]["nodes"]]
    assert [nodes[str(i)]["type"] for i in range(len(types))] == types
    loop = str(types.index("conditional"))
    assert nodes[loop]["bodies"] == [{"name": "body", "graph": f"{loop}/body"}]  # a while
    assert graphs[f"{loop}/body"]["nodes"] == [f"{loop}/body/0"]
    assert nodes[f"{loop}/body/0"]["label"] == "step"
    child = str(types.index("child_graph"))
    assert nodes[f"{child}/child/0"]["type"] == "empty"
    assert any(port == "programmatic" for _, _, port in graphs["root"]["edges"])
    details = {n["type"]: dict(map(tuple, n["details"])) for n in nodes.values()}
    assert details["host"]["fn"] == "walk.mark" and details["host"]["args"] == '["done", [1, 2], null]'
    assert details["memcpy_3d"]["dst"] == "slot w + 0x100"
    assert details["event_record"]["event"] == "ev"
    memset = next(n for n in nodes.values() if n["type"] == "memset")
    assert any(text == "slot y + 0x40" for _, text in memset["details"])
    k1 = nodes[str(types.index("kernel"))]  # a JSON kernel record: its arguments by index
    assert k1["label"] == "step"  # its bytes as saved; the slot its address points into
    assert k1["args"][0][0] == "arg 0" and k1["args"][0][2] == "byte 0: slot y + 0x0"
    assert "f32 2.5" in k1["args"][2][2]
    lib = next(n for n in nodes.values() if n["label"] == "lib")
    assert lib["args"][1][2] == "byte 8: slot x + 0x0"


def test_the_command_writes_the_page_and_refuses_a_damaged_file(tmp_path, capsys):
    path = tmp_path / "chain.pcgraph"
    data = encode(*packed(8))
    path.write_bytes(data)
    out = tmp_path / "chain.html"
    assert cli.main(["show", str(path), "--model", "--out", str(out)]) == 0
    assert "drawn from the file without a GPU" in capsys.readouterr().out
    assert "scale" in out.read_text()
    path.write_bytes(data[:-3])
    assert cli.main(["show", str(path), "--model", "--out", str(out)]) == 1
    assert "truncated" in capsys.readouterr().err
    assert cli.main(["show", str(path), "--model", "--profile"]) == 2
    assert "no --profile" in capsys.readouterr().err


CHROMIUM = chromium_path()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here: apt-get install -y chromium "
                                             "(Debian) to run the page in a headless browser")
def test_the_page_of_a_file_opens_in_a_browser(every_type, tmp_path):
    _, model = every_type
    page = tmp_path / "file.html"
    page.write_text(render_page(model), encoding="utf-8")
    browser = Browser(CHROMIUM)
    try:
        tab = browser.open(page.as_uri())
        assert tab.eval("document.querySelectorAll('g.node').length") == len(model["nodes"])
        tab.click_on('g.node[data-id="2"] rect.box')
        text = tab.eval("document.getElementById('panel').innerText")
        assert "step" in text and "slot y + 0x0" in text
        tab.close()
    finally:
        browser.close()


def test_whatever_the_reader_accepts_is_drawn_and_counted(every_type):
    """Bytes flipped with the checksum recomputed: a file the reader accepts (its checks
    hold) always makes a page model and a node count, never a bare error."""
    m, sections, version = packed_named(named_manifest(12))
    read = 0
    for data in (files.encode(m, sections, version=version),
                 files.encode(every_type[0].manifest, every_type[0].sections[1:])):
        for gf in resealed(data, 600, 7):
            if gf is None:
                continue
            json.dumps(file_model(gf))
            node_counts(gf.manifest, gf.bulk[0]["kernel"] if gf.bulk is not None else None)
            read += 1
    assert read > 50, read  # many files the reader accepts were drawn


def test_bodies_are_named_as_the_nodes_a_load_makes_name_them():
    from pycudagraph.files.schema import record_classes
    from pycudagraph.nodes.conditional import body_names
    assert body_names("if", 1) == ["then"] and body_names("if_else", 2) == ["then", "else"]
    assert body_names("while", 1) == ["body"] and body_names("switch", 3) == ["case 0", "case 1", "case 2"]
    assert body_names("conditional", 2) == ["body 0", "body 1"]  # a kind the driver did not say
    classes = record_classes()
    body = {"handles": [], "nodes": [], "edges": []}
    assert classes["conditional"].record_graph_names(
        {"kind": "if_else", "bodies": [body, body]}) == ["then", "else"]
    assert classes["child_graph"].record_graph_names({"graph": body}) == ["child"]
    assert classes["memset"].record_graph_names({"fields": {}, "sites": []}) == []


def test_a_library_kernel_is_named_as_on_a_live_page_with_its_operation():
    """A kernel saved by name shows its qualified C++ name, its mangled name (searched) and
    the operation its template arguments name, from binary records (format 3) and from
    JSON records (format 1) alike."""
    import copy
    mangled = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayI"
               "PcLm1EEEEviT0_T1_")
    v1 = named_manifest(6)
    v1["kernels"][1]["name"] = mangled
    m, sections, version = packed_named(copy.deepcopy(v1))
    from tests.graph.test_graph_files_bulk import CUBIN
    for gf in (files.decode(files.encode(m, sections, version=version)),
               files.decode(files.encode(v1, CUBIN, version=(1, 0)))):
        node = file_model(gf)["nodes"]["1"]
        assert node["label"] == "at::native::vectorized_elementwise_kernel"
        assert node["operation"] == "FillFunctor"
        assert node["details"][:2] == [["mangled name", mangled], ["operation", "FillFunctor"]]
        assert ["name", mangled] not in node["details"]
        assert "operation" not in file_model(gf)["nodes"]["0"]  # a kernel of the file's module
