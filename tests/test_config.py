"""Configs: the paper's values by default, overrides, and errors that name the key."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mt.config import Config, config_from_dict, config_to_dict, load_config
from mt.core.errors import MtError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_base_config_is_the_papers_base_model_and_optimiser():
    c = load_config([CONFIGS / "base.yaml"])
    m, t = c.model, c.train
    assert (m.d_model, m.num_heads, m.d_ff, m.num_encoder_layers, m.num_decoder_layers) == (512, 8, 2048, 6, 6)
    assert (m.dropout, t.label_smoothing, m.norm) == (0.1, 0.1, "post")
    assert (t.adam_beta1, t.adam_beta2, t.adam_eps, t.warmup_steps, t.lr_scale) == (0.9, 0.98, 1e-9, 4000, 1.0)
    assert c == load_config([CONFIGS / "base.yaml"], run_dir=c.train.run_dir)


def test_defaults_are_the_base_model():
    assert load_config([]).model == load_config([CONFIGS / "base.yaml"]).model


def test_big_config_is_the_papers_big_model():
    m = load_config([CONFIGS / "big.yaml"]).model
    assert (m.d_model, m.num_heads, m.d_ff, m.dropout) == (1024, 16, 4096, 0.3)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    load_config([CONFIGS / "tatoeba-cpu.yaml", path] if path.name.startswith("hub-") else [path])


def test_set_overrides_with_types_and_run_dir_default(tmp_path):
    c = load_config([CONFIGS / "tatoeba-cpu.yaml"], ["train.max_steps=200", "model.dropout=0", "model.norm=pre"])
    assert (c.train.max_steps, c.model.dropout, c.model.norm) == (200, 0.0, "pre")
    assert c.train.run_dir == str(Path("runs") / "tatoeba-cpu")
    assert load_config([], ["train.length_buckets=[32, 64, 128]"]).train.length_buckets == [32, 64, 128]


def test_later_files_override_single_keys(tmp_path):
    overlay = tmp_path / "o.yaml"
    overlay.write_text("model: {d_model: 128}\n", encoding="utf-8")
    c = load_config([CONFIGS / "tatoeba-cpu.yaml", overlay])
    assert (c.model.d_model, c.model.num_heads) == (128, 4)


@pytest.mark.parametrize("override, message", [
    ("model.d_modle=3", "unknown config key model.d_modle"),
    ("modle.d_model=3", "unknown config key modle"),
    ("model.d_model=abc", "config key model.d_model must be int, got 'abc'"),
    ("model.dropout=true", "config key model.dropout must be float"),
    ("model.num_heads=7", "config key model.num_heads: must divide model.d_model"),
    ("model.dropout=-0.1", "config key model.dropout: must be 0 or more"),
    ("model.dropout=1", "config key model.dropout: must be less than 1"),
    ("train.device=tpu", "config key train.device: must be one of auto, cpu, cuda, got 'tpu'"),
    ("model.norm=mid", "config key model.norm: must be one of post, pre"),
    ("decode.nbest=5", "config key decode.nbest: must be between 1 and the beam size (4)"),
    ("model=3", "config key model must be a mapping"),
    ("data.extra_train={path: x}", "config key data.extra_train must be a list"),
    ("data.extra_train=[{path: x}, {pth: y}]", "unknown config key data.extra_train[1].pth"),
    ("data.extra_train=[{repeat: 2}]", "config key data.extra_train[0]: no corpus given"),
    ("data.train.repeat=0", "config key data.train.repeat: must be positive"),
    ("data.dev.max_pairs=10", "config key data.dev: only training corpora are sampled"),
    ("train.length_buckets=[16, x]", "config key train.length_buckets[1] must be int, got 'x'"),
    ("train.length_buckets=[64, 32, 256]", "config key train.length_buckets: must be positive lengths in ascending"),
    ("train.length_buckets=[32, 64]", "config key train.length_buckets: the longest must hold data.max_len (256)"),
    ("train.compile_mode=fast", "config key train.compile_mode: must be one of default, reduce-overhead"),
    ("nokey", "expected KEY=VALUE"),
])
def test_bad_values_name_the_key(override, message):
    with pytest.raises(MtError, match=re.escape(message)):
        load_config([CONFIGS / "base.yaml"], [override])


def test_files_that_are_not_configs(tmp_path):
    (tmp_path / "list.yaml").write_text("- a\n- b\n", encoding="utf-8")
    (tmp_path / "broken.yaml").write_text("model: {d_model: [\n", encoding="utf-8")
    with pytest.raises(MtError, match=r"list\.yaml: a config must be a YAML mapping"):
        load_config([tmp_path / "list.yaml"])
    with pytest.raises(MtError, match=r"broken\.yaml: not valid YAML"):
        load_config([tmp_path / "broken.yaml"])
    with pytest.raises(MtError, match=r"missing\.yaml: cannot read config"):
        load_config([tmp_path / "missing.yaml"])


def test_round_trip_through_a_dict():
    c = load_config([CONFIGS / "tatoeba-cpu.yaml"])
    assert config_from_dict(config_to_dict(c)) == c
    assert isinstance(c, Config)


def test_a_checkpoints_config_from_an_earlier_version_loads_with_a_warning(caplog):
    raw = config_to_dict(load_config([CONFIGS / "tatoeba-cpu.yaml"]))
    raw["decode"]["batch_size"] = 100  # a key a previous mt had
    del raw["decode"]["min_len"]       # a key it did not have yet
    config = config_from_dict(raw, source="old.pt")
    assert config.decode.min_len == 0
    assert "old.pt: ignoring config key decode.batch_size" in caplog.text


def test_generated_docs_are_what_the_declarations_say():
    """docs/config.md and docs/serving.md's request fields are generated from the config keys' and the request
    fields' declarations; run scripts/gen_config_docs.py after changing one."""
    script = CONFIGS.parent / "scripts" / "gen_config_docs.py"
    result = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_section_with_nothing_under_it_has_its_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("decode:\ndata:\n  train:\n  extra_train:\n    - {path: x}\n", encoding="utf-8")
    c = load_config([path], ["data.train.path=y"])
    assert c.decode == Config().decode and c.data.train.path == "y" and c.data.extra_train[0].path == "x"
    with pytest.raises(MtError, match=re.escape("config key data.extra_train[1]: no corpus given")):
        load_config([path], ["data.extra_train=[{path: x}, null]"])
    with pytest.raises(MtError, match="config key model must be a mapping"):
        load_config([], ["model=0"])


def test_configs_do_not_share_their_sections():
    one, other = load_config([]), load_config([])
    one.data.train.path = "mine"
    one.train.length_buckets.append(16)
    assert (other.data.train.path, other.train.length_buckets, Config().data.train.path) == ("", [], "")
