"""The text a :class:`~pycudagraph.compile.program.Program` hands NVRTC, checked first.

NVRTC takes the source, the program name, each option and each name expression as a
NUL-terminated UTF-8 string (``nvrtcCreateProgram``, ``nvrtcCompileProgram``,
``nvrtcAddNameExpression``): a NUL character would cut one short there and compile
something else than what was given, so :func:`program_inputs` refuses it, naming the
parameter and the offset. :func:`read_source` reads a source file as UTF-8, and names the
file, the byte offset and the line of the first byte that is not. No CUDA call.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ArgumentError
from ..runtime.values import c_str_arg, seq_arg, str_items_arg

__all__ = ["program_inputs", "read_source"]


def program_inputs(source, name, options, name_expressions) -> tuple[tuple, tuple]:
    """Check :class:`Program`'s arguments; return (options, name expressions) as tuples.

    Raises
    ------
    ArgumentError
        A source or name that is not a str, an empty name, or any of them (options and
        name expressions too) holding a NUL character or an unpaired surrogate.
    """
    if not isinstance(source, str):
        raise ArgumentError(f"Program source must be a str, got {type(source).__name__}")
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"Program name must be a non-empty str, got {name!r}")
    c_str_arg(source, "Program: source")
    c_str_arg(name, "Program: name")
    if isinstance(options, str):
        options = (options,)
    if isinstance(name_expressions, str):
        name_expressions = (name_expressions,)
    name_expressions = seq_arg(name_expressions, "Program name_expressions")
    for expr in name_expressions:
        if not isinstance(expr, str) or not expr.strip():
            raise ArgumentError(f"a name expression must be a non-empty str, got {expr!r}")
        c_str_arg(expr, "Program: a name expression")
    options = str_items_arg(options, "Program options")
    for opt in options:
        c_str_arg(opt, "Program: an option")
    return options, name_expressions


def read_source(path: Path, where: str = "Module.from_file") -> str:
    """The text of the source file ``path``, read as UTF-8 (as NVRTC reads it).

    Raises
    ------
    ArgumentError
        A file that is not UTF-8 (naming the file, the byte, its offset and line) or that
        holds a NUL character.
    OSError
        A file that cannot be read.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start
        line = data.count(b"\n", 0, at) + 1
        raise ArgumentError(
            f"{where}: {path} must be UTF-8 text, got byte 0x{data[at]:02x} at byte offset "
            f"{at} (line {line}), which is not UTF-8 ({exc.reason}); save the file as "
            "UTF-8") from None
    at = text.find("\0")
    if at >= 0:
        offset = len(text[:at].encode())
        raise ArgumentError(f"{where}: {path} must be text, got a NUL byte at byte offset "
                            f"{offset} (line {text.count(chr(10), 0, at) + 1})")
    return text
