"""Device images from files and bytes: PTX, CUBIN and fatbin read without a GPU (CPU).

The fixtures in ``data/`` were built from ``data/images.cu`` by nvcc 13.0
(``tools/make_image_fixtures.sh``): PTX for compute_75, a CUBIN for sm_90, and two
fatbins holding sm_90 code and compute_90 PTX, one uncompressed and one compressed
(``-compress-mode=size``: every member zstd-compressed, as nvcc >= 12.8 does to PTX
members by default).
"""

import struct
from pathlib import Path

import pytest

import pycudagraph as pcg
from pycudagraph.compile.images import (fatbin_members, image_arch, image_entries, image_kind,
                                        ptx_image, read_image)

DATA = Path(__file__).resolve().parent / "data"
SCALE = "_ZN2ns5scaleIfEEvPT_S1_i"
PLAIN = "_Z5plainPii"


def _sig(kernel):
    return [(p.name, p.ctype, p.size) for p in kernel.params]


@pytest.mark.parametrize("name,kind", [("images.ptx", "ptx"), ("images.cubin", "cubin"),
                                       ("images.fatbin", "fatbin"),
                                       ("images_compressed.fatbin", "fatbin")])
def test_kind_is_read_from_the_bytes(name, kind):
    assert image_kind((DATA / name).read_bytes()) == kind


def test_garbage_is_no_image():
    with pytest.raises(ValueError, match="not a CUBIN.*fatbin.*PTX"):
        image_kind(b"\x00\x01garbage" * 10)
    with pytest.raises(pcg.ArgumentError, match="Module junk.bin: not a CUBIN"):
        pcg.Module(b"\x00\x01garbage" * 10, name="junk.bin")


def test_ptx_file_gives_names_and_types():
    mod = pcg.Module.from_file(DATA / "images.ptx")
    assert mod.kind == "ptx" and mod.arch == "compute_75"
    assert mod.cubin.endswith(b"\0") and mod.cubin.count(b"\0") == 1  # what the loader takes
    assert set(mod.entries) == {"axpy", SCALE, PLAIN}
    assert mod.kernel_names() == ["axpy"]
    k = mod["axpy"]
    assert [(p.ctype, p.size) for p in k.params] == [("void*", 8), ("float", 4), ("void*", 8),
                                                     ("int", 4)]
    named = mod.get_kernel("axpy", signature="float* y, float a, const float* x, int n")
    assert [p.name for p in named.params] == ["y", "a", "x", "n"]


def test_from_ptx_text():
    text = (DATA / "images.ptx").read_text()
    mod = pcg.Module.from_ptx(text, name="mine.ptx")
    assert mod.kind == "ptx" and mod.name == "mine.ptx" and "axpy" in mod.entries
    assert ptx_image(text) == ptx_image(text.encode() + b"\0\0")
    with pytest.raises(pcg.ArgumentError, match="PTX text"):
        pcg.Module.from_ptx(42)


def test_cubin_file_gives_sizes_and_arch():
    mod = pcg.Module.from_file(DATA / "images.cubin")
    assert mod.kind == "cubin" and mod.arch == "sm_90"
    assert [p.size for p in mod.entries["axpy"]] == [8, 4, 8, 4]
    # sizes only: 8-byte parameters take pointers (and ints), others numpy scalars or bytes
    assert [p.kind for p in mod["axpy"].params] == ["pointer", "struct", "pointer", "struct"]


def test_uncompressed_fatbin_members_are_read():
    data = (DATA / "images.fatbin").read_bytes()
    members = {m.kind: m for m in fatbin_members(data)}
    assert sorted((m.kind, m.arch, m.compressed) for m in members.values()) == [
        ("cubin", 90, False), ("ptx", 90, False)]
    assert members["cubin"].payload[:4] == b"\x7fELF" and b".entry axpy" in members["ptx"].payload
    entries, note = image_entries(data)
    assert note == "" and set(entries) == {"axpy", SCALE, PLAIN}
    assert [p.cls for p in entries["axpy"]] == ["int", "float", "int", "int"]  # from the PTX
    mod = pcg.Module.from_file(DATA / "images.fatbin")
    assert mod.kind == "fatbin" and set(mod.arch.split("+")) == {"sm_90", "compute_90"} and mod.image_note == ""
    assert [p.ctype for p in mod["axpy"].params] == ["void*", "float", "void*", "int"]


def test_compressed_fatbin_says_what_it_could_not_read():
    mod = pcg.Module.from_file(DATA / "images_compressed.fatbin")
    assert mod.entries == {} and all(m.compressed for m in fatbin_members(mod.cubin))
    assert "compressed" in mod.image_note and "learnt when the image is loaded" in mod.image_note
    k = mod.get_kernel("axpy")  # trusted: its parameters come from the loaded image
    assert k.symbol == "axpy" and k._declared is None
    typed = mod.get_kernel("axpy", signature="float* y, float a, const float* x, int n")
    assert [p.name for p in typed.params] == ["y", "a", "x", "n"]


def test_truncated_fatbin_is_refused():
    data = (DATA / "images.fatbin").read_bytes()
    with pytest.raises(ValueError, match="truncated fatbin"):
        fatbin_members(data[:200])
    with pytest.raises(pcg.ArgumentError, match="truncated fatbin"):
        pcg.Module(data[:200], name="cut.fatbin")
    bad = bytearray(data)
    struct.pack_into("<Q", bad, 16 + 8, 10 ** 9)  # the first member claims a huge payload
    with pytest.raises(ValueError, match="do not fit"):
        fatbin_members(bytes(bad))


def test_image_arch_of_each_kind():
    assert image_arch((DATA / "images.cubin").read_bytes()) == "sm_90"
    assert image_arch((DATA / "images.ptx").read_bytes()) == "compute_75"
    assert image_arch(b"nonsense") == ""


def test_file_suffix_and_contents_must_agree(tmp_path):
    wrong = tmp_path / "k.cubin"
    wrong.write_bytes((DATA / "images.ptx").read_bytes())
    with pytest.raises(pcg.ArgumentError, match="named .cubin but holds a ptx"):
        pcg.Module.from_file(wrong)
    with pytest.raises(ValueError, match="unknown image suffix"):
        read_image(tmp_path / "k.o")
    with pytest.raises(pcg.ArgumentError, match="options= and arch= apply to source"):
        pcg.Module.from_file(DATA / "images.cubin", arch="sm_90")
    with pytest.raises(FileNotFoundError, match="no CUDA source or image"):
        pcg.Module.from_file(tmp_path / "missing.ptx")


def test_mangled_names_work_for_images():
    for name in ("images.ptx", "images.cubin", "images.fatbin"):
        mod = pcg.Module.from_file(DATA / name)
        k = mod.get_kernel(SCALE)
        assert k.symbol == SCALE and len(k.params) == 3
        with pytest.raises(pcg.ArgumentError, match='not extern "C".*_Z5plainPii.*mangled name'):
            mod.get_kernel("plain")
        with pytest.raises(pcg.ArgumentError, match="only a module compiled here.*" + SCALE):
            mod.get_kernel("ns::scale<float>")
        with pytest.raises(pcg.ArgumentError, match="no kernel named '_Z4nopev'"):
            mod.get_kernel("_Z4nopev")


def test_cu_file_still_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(tmp_path))
    mod = pcg.Module.from_file(DATA / "images.cu", arch="sm_90")
    assert mod.kind == "cubin" and mod.kernel_names() == ["axpy"]
    assert _sig(mod["axpy"]) == [("y", "float*", 8), ("a", "float", 4), ("x", "float*", 8),
                                 ("n", "int", 4)]
    assert _sig(mod["ns::scale<float>"]) == [("y", "float*", 8), ("a", "float", 4), ("n", "int", 4)]


def test_link_takes_ptx_modules(monkeypatch):
    from pycudagraph.compile import link
    calls = []

    class FakeNv:
        class InputType:
            CUBIN, PTX, FATBIN, LIBRARY = "cubin", "ptx", "fatbin", "library"

        class nvJitLinkError(Exception):
            pass

        def create(self, n, opts):
            return 1

        def add_data(self, h, kind, data, size, name):
            calls.append((kind, name))

        def complete(self, h):
            pass

        def get_linked_cubin_size(self, h):
            return len(CUBIN)

        def get_linked_cubin(self, h, buf):
            buf[:] = CUBIN

        def destroy(self, h):
            pass

    CUBIN = (DATA / "images.cubin").read_bytes()
    monkeypatch.setattr(link, "_nvjitlink", lambda: FakeNv())
    out = link.link(pcg.Module.from_file(DATA / "images.ptx"), pcg.Module.from_file(DATA / "images.cubin"),
                    arch="sm_90", device_runtime=False)
    assert calls == [("ptx", str(DATA / "images.ptx")), ("cubin", str(DATA / "images.cubin"))]
    assert out.kind == "cubin" and "axpy" in out.entries


def test_an_image_a_device_cannot_run_says_its_architecture(monkeypatch):
    """``Library.with_arch_hint``: a load refused for want of code for this device
    (``cudaErrorNoKernelImageForDevice`` ...) says what the image was built for and what
    the device is, in the hint and in the message; other errors pass unchanged."""
    from pycudagraph.compile import library
    monkeypatch.setattr(library, "device_arch", lambda: "sm_80")
    lib = library.Library(b"\x7fELF", name="scale.cu", arch="sm_90", advice="compile it again")
    exc = pcg.CudaError("cudaLibraryLoadData", 209, "cudaErrorNoKernelImageForDevice", "no image")
    assert lib.with_arch_hint(exc) is exc
    words = "scale.cu was compiled for sm_90; this device is sm_80: compile it again"
    assert exc.hint == words and words in str(exc)
    other = pcg.CudaError("cudaLibraryLoadData", 2, "cudaErrorMemoryAllocation", "out of memory")
    assert not lib.with_arch_hint(other).hint and "compiled for" not in str(other)
