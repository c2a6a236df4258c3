"""The package follows the data flow: a module imports only from the layers below its own, never from above."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mt"

LAYERS = [  # bottom up: text → pieces → ids → batches → model → search → text, with the command line on top
    {"errors", "memory"},
    {"atomic", "lines", "console", "distributed", "packing", "training_log", "scoring", "stopping", "run_lock"},
    {"config"},
    {"device", "tokenizer"},
    {"data"},
    {"batching", "dropout"},
    {"model", "loss"},
    {"cache", "checkpoint", "prepare"},
    {"search"},
    {"train", "ct2", "hf"},
    {"translate"},
    {"evaluate", "plots", "batcher"},
    {"serve"},
    {"cli"},
    {"__main__"},
]


def layer_of(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if module in layer)


def imported_modules(path: Path) -> set[str]:
    """The mt modules that a file imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mt."):
            names.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names if a.name.startswith("mt."))
    return names


def test_every_module_has_a_layer():
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set().union(*LAYERS)


def test_no_module_imports_one_of_its_own_layer_or_above():
    upward = [f"mt/{path.name} imports mt.{name}" for path in sorted(PACKAGE.glob("*.py")) if path.stem != "__init__"
              for name in sorted(imported_modules(path)) if layer_of(name) >= layer_of(path.stem)]
    assert upward == []


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    (tmp_path / "model.py").write_text("def f():\n    from mt.search import greedy_search\n", encoding="utf-8")
    assert imported_modules(tmp_path / "model.py") == {"search"}
