"""A griffe extension for the docs site (mkdocs.yml loads it), so the API pages show rlcore's
docstrings as written:

* rlcore's docstrings use Sphinx roles (``:class:`X```, ``:func:`~a.b.f```); mkdocstrings renders
  Markdown. Each role becomes an inline code span of its target (the last dotted part when it
  starts with ``~``).
* reStructuredText literal blocks (a paragraph ending in ``::`` and the indented block after it)
  become fenced code blocks after a paragraph ending in ``:``; in Markdown the ``::`` would show
  and the block's first line could join the paragraph.
* a Google-style ``Example:`` section of doctest lines (``>>>``) is read as ``Examples:``, which
  mkdocstrings renders as code; ``Example:`` is an admonition, whose doctest lines would run
  together into one paragraph.
* the buffers are made by ``__new__`` (their base class is native), and mkdocstrings takes a class's
  signature and parameters from ``__init__`` only: a class that defines no ``__init__`` of its own
  and gets its ``__new__`` from itself or a base (before any ``__init__``) is shown with that
  signature.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"^(?P<indent> *)(?P<text>.*?)\s*::$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _literal_blocks(text: str) -> str:
    """rST ``para::`` + indented block -> ``para:`` + a fenced ``text`` block at the paragraph's
    indentation; ``Example:`` over doctest lines -> ``Examples:`` (module docstring)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        nxt = next((x for x in lines[i + 1 :] if x.strip()), "")
        if line.strip() == "Example:" and nxt.strip().startswith(">>>") and _indent(nxt) > _indent(line):
            out.append(line.replace("Example:", "Examples:"))
            i += 1
            continue
        m = _LITERAL.match(line)
        if m is None or line.strip().startswith((">>>", "```")) or not nxt or _indent(nxt) <= _indent(line):
            out.append(line)
            i += 1
            continue
        base, j = _indent(line), i + 1
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
            j += 1
        while not lines[j - 1].strip():  # the blank lines after the block stay outside it
            j -= 1
        block = lines[i + 1 : j]
        while not block[0].strip():
            block.pop(0)
        cut, pad = min(_indent(x) for x in block if x.strip()), " " * base
        if m.group("text"):
            out += [f"{pad}{m.group('text')}:", ""]
        out += [f"{pad}```text", *[pad + x[cut:] if x.strip() else "" for x in block], f"{pad}```"]
        i = j
    return "\n".join(out)


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2).strip()
    if short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _classes(obj: griffe.Object) -> list[griffe.Class]:
    found = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            found.append(member)
        if isinstance(member, griffe.Module | griffe.Class):
            found.extend(_classes(member))
    return found


def _constructor(cls: griffe.Class) -> griffe.Function | None:
    """The ``__new__`` that builds ``cls`` when no ``__init__`` comes before it in the MRO."""
    try:
        chain = [cls, *cls.mro()]
    except (griffe.AliasResolutionError, ValueError):
        chain = [cls]
    for klass in chain:
        if "__init__" in klass.members:
            return None
        new = klass.members.get("__new__")
        if new is not None:
            try:
                target = new.final_target if new.is_alias else new
            except griffe.AliasResolutionError:
                return None
            return target if isinstance(target, griffe.Function) else None
    return None


class SphinxRoles(griffe.Extension):
    """Sphinx roles as code spans; ``__new__`` signatures for classes without ``__init__``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _literal_blocks(_ROLE.sub(_code, obj.docstring.value))

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for cls in _classes(pkg):
            new = _constructor(cls)
            if new is None:
                continue
            params = list(new.parameters)[1:]  # without cls
            init = griffe.Function(
                "__init__",
                parameters=griffe.Parameters(
                    griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword), *params
                ),
                returns=None,
                lineno=new.lineno,
                endlineno=new.endlineno,
            )
            cls.set_member("__init__", init)
