"""README.md's Python fragments against the SDK: each compiles, every name it imports from agentreach exists,
and every method it calls on a client (``c.name(``) is the Client's. A fragment that no longer matches the
SDK's API fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from agentreach import Client

README = Path(__file__).resolve().parent.parent / "README.md"
FRAGMENTS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_fragments() -> None:
    assert len(FRAGMENTS) >= 5


@pytest.mark.parametrize("i", range(len(FRAGMENTS)))
def test_a_readme_fragment_compiles_and_names_what_the_sdk_has(i: int) -> None:
    code = FRAGMENTS[i]
    compile(code, f"README.md fragment {i + 1}", "exec")
    for module, names in re.findall(r"^from (agentreach[\w.]*) import ([\w, ]+)", code, re.M):
        mod = importlib.import_module(module)
        for name in (n.strip() for n in names.split(",")):
            assert hasattr(mod, name), f"fragment {i + 1}: {module} has no {name}"
    for method in re.findall(r"\bc\.(\w+)\(", code):
        assert callable(getattr(Client, method, None)), f"fragment {i + 1}: Client has no method {method}"
