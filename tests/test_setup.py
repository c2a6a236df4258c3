"""The README's set-up, as a user meets it: `source scripts/setup.sh` in their own interactive shell."""
import importlib.metadata
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_sourcing_setup_leaves_an_interactive_shell_as_it_was(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    # After sourcing, a failing command must not close the user's terminal (errexit), and their options stay.
    script = (f"set +o > {before}\nsource scripts/setup.sh\nset +o > {after}\n"
              "false\necho still here\ncommand -v mt\n")
    shell = subprocess.run(["bash", "--norc", "--noprofile", "-i"], input=script, cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
    assert "still here" in shell.stdout, shell.stderr
    assert before.read_text() == after.read_text()
    assert f"{ROOT}/.venv/bin/mt" in shell.stdout


def test_the_installed_package_carries_its_licence():
    metadata = importlib.metadata.metadata("mt")
    assert metadata["License-Expression"] == "MIT" and metadata.get_all("License-File") == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_the_quick_start_keeps_the_checkpoints_the_readmes_average_example_asks_for():
    from mt.config import load_config
    [example] = re.findall(r"`mt average runs/tatoeba-cpu --last (\d+)`", (ROOT / "README.md").read_text("utf-8"))
    train = load_config([ROOT / "configs" / "tatoeba-cpu.yaml"]).train
    written = train.max_steps // train.eval_every  # a step checkpoint follows each validation
    assert int(example) <= min(written, train.keep_last)
