import dataclasses

import pytest

from shoal.config import (
    Config,
    config_to_dict,
    describe_config,
    field_docs,
    load_config,
    preset_names,
    save_config,
)
from shoal.errors import ConfigError


def test_defaults_and_presets_validate():
    Config().validate()
    assert "cartpole" in preset_names()
    cfg = load_config("cartpole")
    assert cfg.env.id == "CartPole-v1"


def test_overrides_parse_toml_values_and_bare_words():
    cfg = load_config(
        None,
        [
            "dqn.lr=5e-4",
            "dqn.hidden=[64, 32]",
            "dqn.target_update=soft",
            "run.stop_return=none",
            "env.id=Acrobot-v1",
            "dqn.gamma=1",
        ],
    )
    assert cfg.dqn.lr == 5e-4
    assert cfg.dqn.hidden == [64, 32]
    assert cfg.dqn.target_update == "soft"
    assert cfg.run.stop_return is None
    assert cfg.env.id == "Acrobot-v1"
    assert cfg.dqn.gamma == 1.0 and isinstance(cfg.dqn.gamma, float)


@pytest.mark.parametrize(
    ("override", "must_mention"),
    [
        ("dqn.lrr=1", ["dqn.lrr", "lr"]),
        ("foo.lr=1", ["foo", "dqn"]),
        ("dqn.lr=-1", ["dqn.lr", "-1", "> 0"]),
        ("dqn.batch_size=0", ["dqn.batch_size", "0", "> 0"]),
        ("replay.capacity=-5", ["replay.capacity", "-5"]),
        ("dqn.hidden=[64, 0]", ["dqn.hidden[1]", "0"]),
        ("dqn.n_step=2.5", ["dqn.n_step", "2.5", "integer"]),
        ("run.seed=true", ["run.seed", "True", "integer"]),
        ("dqn.dueling=3", ["dqn.dueling", "true or false"]),
        ("dqn.target_update=medium", ["dqn.target_update", "medium", "'hard'"]),
        ("dqn.gamma=1.5", ["dqn.gamma", "1.5", "<= 1"]),
        ("run.device=tpu", ["run.device", "tpu", "'cuda'"]),
        ("explore.eps_end=0.9", ["explore.eps_end", "0.9"]),
        ("lr=1", ["SECTION.KEY"]),
        ("dqn.lr", ["SECTION.KEY=VALUE"]),
    ],
)
def test_bad_values_name_key_value_and_allowed(override, must_mention):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override, "explore.eps_start=0.5"])
    for text in must_mention:
        assert text in str(e.value)


def test_malformed_and_missing_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[dqn\nlr = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config("no-such-preset")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[dqn]\nlearning_rate = 1e-3\n")
    with pytest.raises(ConfigError, match="unknown config key 'dqn.learning_rate'"):
        load_config(unknown)


def test_save_and_reload_round_trip(tmp_path):
    cfg = load_config("cartpole", ["dqn.lr=3e-4", "env.max_episode_steps=200"])
    save_config(cfg, tmp_path / "config.toml")
    again = load_config(tmp_path / "config.toml")
    assert config_to_dict(again) == config_to_dict(cfg)


def test_every_field_has_a_docstring_for_help():
    for name, section in Config().sections():  # runner-owned sections included
        cls = type(section)
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            assert docs.get(f.name), f"{name}.{f.name} has no docstring"
    text = describe_config()
    assert "dqn.lr" in text and "Adam learning rate" in text


def test_board_shape_is_checked():
    assert load_config(None, ["dqn.board=[6, 7, 2]"]).dqn.board == [6, 7, 2]
    assert load_config(None).dqn.board == []
    with pytest.raises(ConfigError, match="dqn.board"):
        load_config(None, ["dqn.board=[6, 7]"])
    with pytest.raises(ConfigError, match=r"dqn.board\[1\]"):
        load_config(None, ["dqn.board=[6, 0, 2]"])
