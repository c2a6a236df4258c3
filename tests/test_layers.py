"""The package follows the data flow: a package imports only from the packages below it, and inside a package a
module imports only from the modules below its own."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mt"

PACKAGES = [  # bottom up: text → pieces → ids → batches → model → search → text, with the command line on top
    "core", "data", "model", "config", "exchange", "decode", "clean", "text", "train", "serve", "plots", "options",
    "cli", "__main__",
]

MODULES = {  # bottom up inside each package
    "core": [{"errors", "memory", "openmp", "schema"},
             {"atomic", "lines", "console", "distributed", "scoring", "stopping", "run_dir"}, {"device", "run_lock"}],
    "data": [{"script_conversion", "word_translation", "normalise", "glossary", "repairs"}, {"lexical"}, {"filters"},
             {"config"}, {"tokenizer"}, {"corpora", "terms"}, {"batching"}],
    "model": [{"config", "dropout"}, {"transformer"}],
    "exchange": [{"checkpoint"}, {"export"}, {"marian"}, {"ctranslate2", "huggingface", "import_huggingface"}],
    "decode": [{"cache", "packing", "shortlist", "sampling", "constraints", "confidence"}, {"engine", "steps", "guard"},
               {"search", "score"}, {"constrained", "running"}, {"searcher", "ctranslate2"}, {"translator"},
               {"evaluate", "distill", "confidence_fit"}],
    "clean": [{"contamination"}, {"cleaning"}, {"report"}],
    "text": [{"sentences"}, {"marks"}, {"align", "markup"}, {"glossary_modes"}, {"documents", "texts"}, {"files"}],
    "train": [{"prepare", "loss", "training_log"}, {"trainer", "progress", "updates"}, {"validation"}, {"loop"},
              {"adapt"}],
    "serve": [{"errors", "languages", "batcher", "limits", "answers", "translation_cache", "suggestions"},
              {"downloads", "bodies", "continuous"},
              {"requests", "pipeline"}, {"admission"}, {"libretranslate", "mt_api"}, {"app"}, {"server"}],
}


def unit(path: Path) -> tuple[str, str]:
    """(package, module) of a file of mt: ("data", "batching"), or ("cli", "cli") for a top-level module."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return (parts[0], parts[-1]) if len(parts) > 1 else (parts[0], parts[0])


def imported_units(path: Path) -> set[tuple[str, str]]:
    """The (package, module) pairs of mt that a file imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mt."):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("mt."))
    return {(name.split(".")[1], name.split(".")[-1]) for name in names}


def sources() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")


def layer_of(package: str, module: str) -> int:
    return next(i for i, layer in enumerate(MODULES.get(package, [{module}])) if module in layer)


def test_every_module_has_a_place():
    placed = {(package, module) for package, layers in MODULES.items() for layer in layers for module in layer}
    found = {unit(path) for path in sources()}
    assert {u for u in found if u[0] in MODULES} == placed
    assert {package for package, _ in found} == set(PACKAGES)


def test_no_package_imports_one_above_it():
    upward = [f"{path.relative_to(PACKAGE.parent)} imports mt.{package}" for path in sources()
              for package, _ in sorted(imported_units(path)) if PACKAGES.index(package) > PACKAGES.index(unit(path)[0])]
    assert upward == []


def test_no_module_imports_one_of_its_own_layer_or_above_in_its_package():
    upward = [f"{path.relative_to(PACKAGE.parent)} imports mt.{package}.{module}" for path in sources()
              for package, module in sorted(imported_units(path))
              if package == unit(path)[0] and package in MODULES and layer_of(package, module) >= layer_of(*unit(path))]
    assert upward == []


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    (tmp_path / "model.py").write_text("def f():\n    from mt.decode.search import greedy_search\n", encoding="utf-8")
    assert imported_units(tmp_path / "model.py") == {("decode", "search")}
