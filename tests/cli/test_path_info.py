"""``python -m pycudagraph info PATH`` on the CPU: what a graph file and a saved graphed
callable hold, read and checked as a load checks them, with no CUDA call; a damaged file
or folder said on stderr with exit status 1."""

import hashlib
import json

import pytest

import pycudagraph as pcg
from pycudagraph.cli import main as cli
from pycudagraph.cli.path_info import describe_path, node_counts
from pycudagraph.files import archive as files
from pycudagraph.frameworks.graphed_index import write_index
from tests.frameworks.test_graphed_files import sample
from tests.graph.test_graph_files_bulk import chain_manifest, encode, packed
from tests.graph.test_graph_files_named_kernels import named_manifest
from tests.graph.test_graph_files_named_kernels import packed as packed_named


def chain_file(tmp_path, nodes=1000):
    path = tmp_path / "chain.pcgraph"
    path.write_bytes(encode(*packed(nodes)))
    return path


def saved_folder(tmp_path):
    """A saved callable of one key whose file is a graph with kernels saved by name."""
    m, sections, version = packed_named(named_manifest(10))
    data = files.encode(m, sections, version=version)
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "key-000.pcgraph").write_bytes(data)
    ix = sample()
    ix["keys"][0].update(nbytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    write_index(folder, ix)
    return folder


def test_a_graph_file_is_described_with_no_cuda_call(tmp_path):
    path = chain_file(tmp_path)
    with pcg.trace() as t:
        text = describe_path(path)
    assert t.calls == []
    assert f"graph file: {path} (" in text and "format 2.0, written by test for sm_90" in text
    assert "nodes: 1000 (kernel 1000)" in text
    assert "kernels: 2 (2 from the file's modules)" in text
    assert "module 'm.cu' (sm_90): CUBIN" in text
    assert "    axpy: 500 node(s)\n    scale: 500 node(s)" in text  # each kernel's records
    assert "slots: 2 (device 2; 128.0 KiB)" in text and "    x  device  64.0 KiB" in text


def test_kernels_saved_by_name_are_counted_apart():
    m, sections, version = packed_named(named_manifest(10))
    gf = files.decode(files.encode(m, sections, version=version))
    kinds, nested = node_counts(gf.manifest, gf.bulk[0]["kernel"])
    assert kinds == {"kernel": 5, "library kernel": 5} and nested == 0


def test_nested_graphs_are_counted_with_their_nodes():
    body = {"handles": [], "nodes": [{"id": 1, "type": "empty"}, {"id": 2, "type": "memset"}],
            "edges": []}
    m = {"kernels": [], "root": {"handles": [], "edges": [], "nodes": [
        {"id": 0, "type": "child_graph", "graph": body},
        {"id": 3, "type": "conditional", "bodies": [dict(body), dict(body)]}]}}
    kinds, nested = node_counts(m)
    assert nested == 3
    assert kinds == {"child_graph": 1, "conditional": 1, "empty": 3, "memset": 3}


def test_many_slots_are_listed_up_to_twelve(tmp_path):
    m = chain_manifest(20)
    m["slots"].update({f"s{i}": {"kind": "device", "nbytes": 256} for i in range(20)})
    path = tmp_path / "many.pcgraph"
    path.write_bytes(encode(*_pack(m)))
    text = describe_path(path)
    assert "slots: 22 (device 22;" in text and "... 10 more" in text


def _pack(m):
    from pycudagraph.files import bulk_format
    from tests.graph.test_graph_files_bulk import CUBIN, kernels
    return bulk_format.pack(m, CUBIN, dict(enumerate(kernels())))


def test_a_saved_callable_is_described_key_by_key(tmp_path):
    folder = saved_folder(tmp_path)
    with pcg.trace() as t:
        text = describe_path(folder)
    assert t.calls == []
    assert f"saved graphed callable: {folder} (format pycudagraph.graphed 1.0" in text
    assert "saved from: step on NVIDIA H100 80GB HBM3 (sm_90); torch 2.11.0" in text
    assert "keys: 1," in text and "SHA-256 the index says" in text
    assert "key-000.pcgraph ((2, 4) float32): 10 nodes, 2 library kernel(s)" in text
    assert "bindings: 2 (buffer 1, param 1; 160 B), bound by name" in text
    assert "pool 0 (torch): 3.0 MiB in 2 segment(s)" in text
    assert "workspaces: 1 (4.0 KiB)" in text
    assert "library kernels to find by name when loaded: 2 (1 distinct set(s)" in text
    assert text.endswith(f"the page of a key: python -m pycudagraph show {folder / 'key-000.pcgraph'}")


def test_the_command_prints_it_and_exits_0(tmp_path, capsys):
    path = chain_file(tmp_path, 8)
    assert cli.main(["info", str(path)]) == 0
    assert "nodes: 8 (kernel 8)" in capsys.readouterr().out


@pytest.mark.parametrize("damage,words", [
    ("truncate", "truncated: the header says"),
    ("missing", "no such file or folder"),
])
def test_a_damaged_or_missing_file_is_said_with_status_1(tmp_path, capsys, damage, words):
    path = chain_file(tmp_path, 8)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-10])
    else:
        path = tmp_path / "none.pcgraph"
    assert cli.main(["info", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and words in captured.err and str(path) in captured.err


@pytest.mark.parametrize("damage,words", [
    ("key file", "its SHA-256 differs from the index's"),
    ("index", "not a JSON index"),
    ("no index", "a folder with no index.json"),
])
def test_a_damaged_saved_callable_is_said_with_status_1(tmp_path, capsys, damage, words):
    folder = saved_folder(tmp_path)
    if damage == "key file":
        data = bytearray((folder / "key-000.pcgraph").read_bytes())
        data[100] ^= 1
        (folder / "key-000.pcgraph").write_bytes(bytes(data))
    elif damage == "index":
        text = (folder / "index.json").read_text()
        (folder / "index.json").write_text(text[:len(text) // 2])
    else:
        (folder / "index.json").unlink()
    assert cli.main(["info", str(folder)]) == 1
    assert words in capsys.readouterr().err


def test_a_key_file_the_index_accepts_but_a_load_refuses_is_named(tmp_path, capsys):
    folder = saved_folder(tmp_path)
    data = b"PCGRAPH0 not a graph file"
    (folder / "key-000.pcgraph").write_bytes(data)
    ix = json.loads((folder / "index.json").read_text())
    ix["keys"][0].update(nbytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    write_index(folder, ix)
    assert cli.main(["info", str(folder)]) == 1
    assert "key-000.pcgraph" in capsys.readouterr().err


def test_past_twelve_keys_are_counted_and_still_checked(tmp_path, capsys):
    folder = saved_folder(tmp_path)
    ix = json.loads((folder / "index.json").read_text())
    data = (folder / "key-000.pcgraph").read_bytes()
    for i in range(1, 14):
        (folder / f"key-{i:03d}.pcgraph").write_bytes(data)
        ix["keys"].append(dict(ix["keys"][0], file=f"key-{i:03d}.pcgraph"))
    write_index(folder, ix)
    text = describe_path(folder)
    assert "keys: 14," in text and "key-011.pcgraph" in text and "key-012" not in text
    assert "    ... 2 more" in text
    # the last file, not listed, is checked whole all the same
    m, sections, version = packed_named(named_manifest(10))
    bad = bytearray(files.encode(m, sections, version=version))
    bad[-1] ^= 1  # its checksum fails
    bad = bytes(bad)
    (folder / "key-013.pcgraph").write_bytes(bad)
    ix["keys"][13].update(nbytes=len(bad), sha256=hashlib.sha256(bad).hexdigest())
    write_index(folder, ix)
    assert cli.main(["info", str(folder)]) == 1
    assert "key-013.pcgraph" in capsys.readouterr().err


def test_library_kernels_are_listed_by_use_with_what_they_compute(tmp_path):
    """A key of a saved PyTorch model: its kernels by records, most first, each library
    kernel by its qualified name and the operation its mangled name gives; the rest
    counted."""
    v1 = named_manifest(40, every=2)
    fill = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayI"
            "PcLm1EEEEviT0_T1_")
    v1["kernels"][1]["name"] = fill
    path = tmp_path / "key.pcgraph"
    m, sections, version = packed_named(v1)
    path.write_bytes(files.encode(m, sections, version=version))
    text = describe_path(path)
    assert "at::native::vectorized_elementwise_kernel (FillFunctor): 20 node(s)" in text
    assert "    axpy: 20 node(s)" in text
    from pycudagraph.files import bulk_format
    from tests.graph.test_graph_files_bulk import CUBIN, kernels
    many = chain_manifest(40)  # axpy on even nodes, scale on odd ones
    many["kernels"] += [dict(many["kernels"][0], name=f"k{i}") for i in range(10)]
    for i, node in enumerate(many["root"]["nodes"][0::2]):  # 20 axpy nodes over 11 kernels
        node["kernel"] = 0 if i < 10 else 2 + i - 10
    axpy, scale = kernels()
    path.write_bytes(encode(*bulk_format.pack(many, CUBIN, {0: axpy, 1: scale,
                                                            **{k: axpy for k in range(2, 12)}})))
    text = describe_path(path)
    assert "    scale: 20 node(s)\n    axpy: 10 node(s)\n" in text and "    ... 4 more" in text
