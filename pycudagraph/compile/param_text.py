"""Parameter-list text the signature parser (:mod:`.signature`) needs beyond ``type name``.

- a list split into its declarations at top-level commas (:func:`split_params`);
- C declarators: attributes (``[[maybe_unused]]``, ``__attribute__((...))``), function
  pointers (``void (*cb)(int)``), pointers to arrays (``int (*rows)[4]``) and parenthesised
  names (``float (*p)``, ``int (n)``);
- a lenient reading of a list the parser cannot read (``decltype(x) s``): each parameter's
  name as far as it can be told, and its reading where that one parameter can be read;
- :func:`signature_text`: a parameter list as one short line, for messages.

No CUDA call.
"""

from __future__ import annotations

import re

__all__ = ["split_params", "without_attributes", "pointer_declarator", "plain_declarator",
           "guess_name", "lenient_params", "signature_text"]

_ATTRIBUTES = re.compile(r"\[\[.*?\]\]|\b__attribute__\s*\(\(.*?\)\)")
_FUNCTION_POINTER = re.compile(
    r"([^()]*?)\(\s*\*\s*(?:const\s+)?([A-Za-z_]\w*)?\s*\)\s*\((.*)\)", re.S)
_ARRAY_POINTER = re.compile(
    r"([^()]*?)\(\s*\*\s*(?:const\s+)?([A-Za-z_]\w*)?\s*\)\s*\[([^\]]*)\]", re.S)
_PAREN_DECLARATOR = re.compile(r"([^()]*?)\(\s*(\**)\s*([A-Za-z_]\w*)\s*\)", re.S)
_PAREN_NAME = re.compile(r"\(\s*[*&]*\s*([A-Za-z_]\w*)\s*\)")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _words(text: str) -> str:
    return " ".join(text.split())


def split_params(text: str, keep_empty: bool = False) -> list[str]:
    """``text`` split at top-level commas (empty parts dropped unless ``keep_empty``)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    last = "".join(cur).strip()
    if last or keep_empty:
        parts.append(last)
    return parts if keep_empty else [p for p in parts if p.strip()]


def without_attributes(text: str) -> str:
    """``text`` with C++ and GNU attributes taken out."""
    return _ATTRIBUTES.sub(" ", text).strip()


def pointer_declarator(text: str) -> tuple[str, str | None] | None:
    """(C type, name or None) of a function pointer or a pointer to arrays, else None:
    both are 8-byte addresses a launch passes as it passes a pointer."""
    fn = _FUNCTION_POINTER.fullmatch(text)
    if fn:
        return f"{_words(fn.group(1))} (*)({_words(fn.group(3))})", fn.group(2)
    array = _ARRAY_POINTER.fullmatch(text)
    if array:
        return f"{_words(array.group(1))} (*)[{array.group(3).strip()}]", array.group(2)
    return None


def plain_declarator(text: str) -> str:
    """``float (*p)`` -> ``float *p``: parentheses around a name change nothing here."""
    paren = _PAREN_DECLARATOR.fullmatch(text)
    return f"{paren.group(1)} {paren.group(2)}{paren.group(3)}" if paren else text


def guess_name(part: str, index: int, skip) -> str:
    """The name a parameter declaration gives, as far as it can be told (``argN`` when it
    cannot): a parenthesised name, else the last word that is not in ``skip`` (qualifiers
    and type words)."""
    clean = without_attributes(part.split("=", 1)[0])
    inner = _PAREN_NAME.search(clean)
    if inner:
        return inner.group(1)
    words = [w for w in _WORD.findall(clean.rsplit(")", 1)[-1]) if w not in skip]
    return words[-1] if words else f"arg{index}"


def lenient_params(parts: list[str], parse_one, skip) -> tuple[tuple[str, object], ...]:
    """Each parameter declaration of ``parts`` as (its name as far as it can be told, what
    ``parse_one(index, text)`` reads, or ``None`` where it raises ``ValueError``): what
    the compiled sizes complete. ``skip``: the words that are not names."""
    out = []
    for i, part in enumerate(parts):
        try:
            p = parse_one(i, part)
            out.append((p.name, p))
        except ValueError:
            out.append((guess_name(part, i, skip), None))
    return tuple(out)


def signature_text(params, most: int = 8) -> str:
    """``float* y, float a, int n``; a long list shows its first and last parameters
    around ``... (N more) ...`` so a message stays one readable line."""
    texts = [p.describe() for p in params]
    if len(texts) > most:
        texts = texts[: most - 2] + [f"... ({len(texts) - most + 1} more) ..."] + texts[-1:]
    return ", ".join(texts)
