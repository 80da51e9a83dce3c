"""AST policy: each banned construct is refused with a named reason; honest code passes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ke_evaluator.judge.static_policy import check_candidate

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
MODEL = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def _src(body: str) -> str:
    return HEADER + textwrap.dedent(body) + MODEL


BANNED = [
    ("import threading", "thread or process creation"),
    ("from concurrent.futures import ThreadPoolExecutor", "thread or process creation"),
    ("import multiprocessing as mp", "thread or process creation"),
    ("import subprocess", "thread or process creation"),
    ("from torch import multiprocessing", "thread or process creation"),
    ("import os\nos.system('true')", "process access"),
    ("import urllib.request", "network access"),
    ("import requests", "network access"),
    ("import ctypes", "native code"),
    ("import inspect", "frame/global inspection"),
    ("import gc", "frame/global inspection"),
    ("import sys as s", "frame/global inspection"),
    ("x = globals()", "globals()"),
    ("x = vars()", "vars()"),
    ("y = (lambda: 0).__globals__", "frame/global inspection"),
    ("y = __builtins__", "__builtins__"),
    ("f = open('x', 'w')", "file IO"),
    ("import importlib", "dynamic import"),
    ("m = __import__('os')", "dynamic import"),
    ("from reference import Model", "imports the spec"),
    ("import _ke_spec_0123", "imports the spec"),
    ("from . import sibling", "relative import"),
    ("import time", "timing functions"),
    ("torch.cuda.synchronize = lambda: None", "patches a module attribute"),
    ("triton.runtime.jit.JITFunction.run = None", "patches a module attribute"),
    ("setattr(torch, 'matmul', None)", "setattr"),
    ("g = getattr(torch, 'mat' + 'mul')", "computed attribute access"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "precision flags"),
    ("c = torch.cuda\ns = c.Stream()", "CUDA stream"),
    ("torch.set_float32_matmul_precision('high')", "precision flags"),
    ("try:\n    pass\nexcept Exception:\n    pass", "try/except"),
    ("class M2(Model):\n    pass", "subclasses the reference Model"),
    ("class T(torch.Tensor):\n    pass", "lazy tensor subclass"),
    ("def f(x):\n    return x.as_subclass(torch.Tensor)", "lazy tensor subclass"),
    ("f = torch.compile", "torch.compile"),
    ("import torch._inductor", "compiler fallback"),
    ("import numpy", "array library"),
    ("exec('1')", "exec"),
    ("_CACHE = {}\ndef f(k, v):\n    _CACHE[k] = v", "result caching"),
    ("_CACHE = {}\ndef f(k, v):\n    _CACHE.update({k: v})", "result caching"),
    ("import functools\n@functools.lru_cache(None)\ndef f(k):\n    return k", "result caching"),
    ("def f():\n    global X\n    X = 1", "global statement"),
    ("torch.manual_seed(0)", "reseeds"),
    ("from os import environ", "environment"),
    ("from contextlib import suppress", "not on the allowlist"),
    ("f = torch.utils.cpp_extension.load_inline", "native code"),
    ("p = torch.multiprocessing.Process", "thread or process creation"),
    ("from torch.utils._python_dispatch import TorchDispatchMode", "dispatch interception"),
    ("class M:\n    def __torch_function__(self, *a):\n        pass", "dispatch interception"),
    ("lib = torch.library.Library('aten', 'IMPL')", "torch.library"),
    ("torch.nn.modules.module.register_module_forward_hook(print)", "global module hooks"),
]


@pytest.mark.parametrize(("body", "reason"), BANNED, ids=[b[0].splitlines()[0][:40] for b in BANNED])
def test_banned_constructs(body: str, reason: str) -> None:
    report = check_candidate(_src(body))
    assert not report.ok
    assert reason in report.reason, report.reason


def test_state_written_in_forward_is_refused_but_init_is_fine() -> None:
    src = HEADER + textwrap.dedent("""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = {}
                self.scale = 2.0

            def forward(self, x):
                self.cache[x.data_ptr()] = x
                return x
    """)
    report = check_candidate(src)
    assert not report.ok and "result caching" in report.reason
    assert "self.cache[x.data_ptr()]" in report.reason


ALLOWED = [
    "import math\nfrom typing import Optional",
    "def helper(x):\n    return torch.stack([x, x]).sum(0)",
    "def launch(k, x):\n    y = torch.empty_like(x)\n    k[(1,)](x, y)\n    return y",
    "@triton.autotune(configs=[triton.Config({'B': 1024})], key=['n'])\n@triton.jit\n"
    "def k(x, n, B: tl.constexpr):\n    pass",
    "import torch.nn.functional as F\ndef f(x):\n    cache = {}\n    cache[1] = x\n    return F.pad(x, (0, 1))",
    "if __name__ == '__main__':\n    import sys\n    try:\n        pass\n    except Exception:\n        pass",
]


@pytest.mark.parametrize("body", ALLOWED, ids=range(len(ALLOWED)))
def test_honest_code_passes(body: str) -> None:
    report = check_candidate(_src(body))
    assert report.ok, report.reason


def test_syntax_error_and_missing_model_are_not_policy_findings() -> None:
    bad = check_candidate("def f(:\n")
    assert not bad.ok and bad.syntax_error.startswith("syntax error at line 1")
    missing = check_candidate(HEADER)
    assert not missing.ok and "ModelNew" in missing.syntax_error and not missing.findings


@pytest.mark.parametrize(
    "body",
    [
        "def make():\n    memo = {}\n    def f(k, v):\n        memo[k] = v\n    return f",
        "def make():\n    memo = []\n    return lambda v: memo.append(v)",
        "class C:\n    store = {}\n    def put(self, k, v):\n        type(self).store[k] = v",
        "def f(x):\n    object.__setattr__(x, 'a', 1)",
        "import operator\ng = operator.attrgetter('__globals__')",
    ],
    ids=["closure-dict", "closure-list-lambda", "class-attribute", "object-setattr", "attrgetter"],
)
def test_indirect_state_and_attribute_tricks(body: str) -> None:
    report = check_candidate(_src(body))
    assert not report.ok, body


def test_local_containers_are_fine() -> None:
    body = "def grid(n, blocks):\n    out = []\n    for b in blocks:\n        out.append(n // b)\n    d = {}\n" \
           "    d['k'] = out\n    return d\n"
    assert check_candidate(_src(body)).ok


# Construction helpers: a method only __init__ calls may set attributes (torchvision's
# _make_layer sets self.inplanes as it builds); any other way to reach it later keeps the
# "mutable state" finding.
_HELPER_CLASS = '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inplanes = 4
        self.layer = self._make_layer(8){init_extra}

    def _make_layer(self, planes):
        self.inplanes = planes
        self.seen = []
        return nn.Linear(4, planes)

    def forward(self, x):{forward_extra}
        return self.layer(x)
'''


def _helper_src(init_extra: str = "", forward_extra: str = "", name: str = "_make_layer") -> str:
    body = _HELPER_CLASS.format(init_extra=init_extra, forward_extra=forward_extra).replace("_make_layer", name)
    return HEADER + body


def test_a_construction_helper_may_set_attributes() -> None:
    report = check_candidate(_helper_src())
    assert report.ok, report.reason


def test_a_construction_helper_reached_through_another_one_may_too() -> None:
    src = _helper_src().replace("self.layer = self._make_layer(8)", "self.layer = self._build()").replace(
        "    def forward", "    def _build(self):\n        return self._make_layer(8)\n\n    def forward")
    assert check_candidate(src).ok


@pytest.mark.parametrize("how", [
    pytest.param({"forward_extra": "\n        self._make_layer(3)"}, id="also-called-from-forward"),
    pytest.param({"init_extra": "\n        self.register_forward_hook(self._make_layer)"}, id="registered-as-hook"),
    pytest.param({"init_extra": "\n        self.later = lambda: self._make_layer(3)"}, id="called-inside-a-lambda"),
    pytest.param({"init_extra": "\n        self.g = getattr(self, '_make_layer')"}, id="named-in-a-string"),
    pytest.param({"name": "train"}, id="a-module-method-runs-by-itself"),
    pytest.param({"name": "__call__"}, id="a-dunder-runs-by-itself"),
])
def test_a_helper_reachable_after_construction_is_not_exempt(how: dict[str, str]) -> None:
    report = check_candidate(_helper_src(**how))
    assert not report.ok
    assert "mutable state written outside __init__" in report.reason


def test_module_method_names_cover_the_installed_torch() -> None:
    from ke_evaluator.judge import static_policy

    # a fresh interpreter: other tests' imports may have patched nn.Module in this one
    probe = "import torch; print(' '.join(n for n in dir(torch.nn.Module) if not n.startswith('__')))"
    own = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    assert own <= static_policy._MODULE_METHODS, sorted(own - static_policy._MODULE_METHODS)
