import dataclasses
import os
import typing
from dataclasses import dataclass

import pytest

from shoal.config import (
    CONFIG_VERSION,
    Config,
    config_to_dict,
    describe_config,
    field_docs,
    load_config,
    load_run_config,
    load_section,
    param,
    preset_names,
    save_config,
)
from shoal.errors import ConfigError


def test_defaults_and_presets_validate():
    Config().validate()
    assert "cartpole" in preset_names()
    cfg = load_config("cartpole")
    assert cfg.env.id == "CartPole-v1"
    for name in preset_names():  # a bad key or value raises ConfigError naming it
        load_config(name)


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
        ("dqn.lr=-1", ["dqn.lr", "-1", "0.0 < value <= 1.0"]),
        ("dqn.batch_size=0", ["dqn.batch_size", "0", "0 < value <= 16777216"]),
        ("replay.capacity=-5", ["replay.capacity", "-5"]),
        ("dqn.hidden=[64, 0]", ["dqn.hidden[1]", "0"]),
        ("dqn.n_step=2.5", ["dqn.n_step", "2.5", "integer"]),
        ("run.seed=true", ["run.seed", "True", "integer"]),
        ("dqn.dueling=3", ["dqn.dueling", "true or false"]),
        ("dqn.target_update=medium", ["dqn.target_update", "medium", "'hard'"]),
        ("dqn.gamma=1.5", ["dqn.gamma", "1.5", "allowed: 0.0 <= value <= 1.0"]),
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


def old_run_config(path, guide):
    """A run's config as shoal saved it before config_version 2: every key, no version."""
    cfg = load_config("mapf", [f"mapf.shield_guide={guide}"])
    save_config(cfg, path)
    text = path.read_text()
    assert text.startswith(f"config_version = {CONFIG_VERSION}\n")
    path.write_text(text.split("\n", 1)[1])
    return path


def test_an_older_runs_written_default_is_read_as_todays_and_its_choices_stay(tmp_path):
    """mapf.shield_guide's default went 0 -> 3 in config_version 2: a run saved before with
    0 (the default it was written with) is read with 3; another value was a choice."""
    assert load_config("mapf").mapf.shield_guide == 3.0
    old = old_run_config(tmp_path / "old.toml", 0.0)
    assert load_run_config(old).mapf.shield_guide == 3.0
    assert load_config(old).mapf.shield_guide == 0.0  # a user's TOML: as written
    assert load_run_config(old, ["mapf.shield_guide=0.0"]).mapf.shield_guide == 0.0
    chosen = old_run_config(tmp_path / "chosen.toml", 0.5)
    assert load_run_config(chosen).mapf.shield_guide == 0.5
    new = tmp_path / "new.toml"  # a run of today that chose 0
    save_config(load_config("mapf", ["mapf.shield_guide=0.0"]), new)
    assert load_run_config(new).mapf.shield_guide == 0.0


@pytest.mark.parametrize("version", ["2", "0", "99", "true"])
def test_a_config_version_shoal_does_not_know_is_one_line(tmp_path, version):
    path = tmp_path / "c.toml"
    path.write_text(f"config_version = {version}\n[dqn]\nlr = 1e-3\n")
    if version == "2":
        assert load_config(path).dqn.lr == 1e-3
        return
    with pytest.raises(ConfigError, match="'config_version' is .*allowed: 1 to"):
        load_config(path)


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


# --- Regressions: every bad input is a one-line ConfigError naming the key or the file,
# the value and what is allowed.


@dataclass
class Bounded:
    """Every combination of bounds that ``param`` supports."""

    ge_le: float = param(0.5, ge=0.0, le=1.0)
    gt_le: float = param(0.5, gt=0.0, le=1.0)
    ge_lt: float = param(0.5, ge=0.0, lt=1.0)
    gt_lt: float = param(0.5, gt=0.0, lt=1.0)
    ge: float = param(0.5, ge=0.0)
    gt: float = param(0.5, gt=0.0)
    le: float = param(0.5, le=1.0)
    lt: float = param(0.5, lt=1.0)
    count: int = param(1, gt=0)
    plain: int = 0


def _bounded_error(override: str) -> str:
    with pytest.raises(ConfigError) as e:
        load_section(Bounded, "b", overrides=[override])
    message = str(e.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("override", "allowed"),
    [
        ("ge_le=1.5", "0.0 <= value <= 1.0"),
        ("ge_le=-0.5", "0.0 <= value <= 1.0"),
        ("gt_le=0", "0.0 < value <= 1.0"),
        ("ge_lt=1", "0.0 <= value < 1.0"),
        ("gt_lt=1", "0.0 < value < 1.0"),
        ("gt_lt=0.0", "0.0 < value < 1.0"),
        ("ge=-1", ">= 0.0"),
        ("gt=0", "> 0.0"),
        ("le=2", "<= 1.0"),
        ("lt=1", "< 1.0"),
        # Integer keys are also held to int64 (numpy and torch would overflow past it).
        ("count=0", f"0 < value <= {2**63 - 1}"),
        (f"plain={2**63}", f"{-(2**63)} <= value <= {2**63 - 1}"),
        (f"plain={-(2**63) - 1}", f"{-(2**63)} <= value <= {2**63 - 1}"),
    ],
)
def test_bound_messages_state_the_range_the_check_applies(override, allowed):
    key, value = override.split("=")
    message = _bounded_error(override)
    assert message == f"config key 'b.{key}': {value} is out of range; allowed: {allowed}"


def test_values_on_the_bounds_are_accepted():
    got = load_section(
        Bounded,
        "b",
        overrides=["ge_le=0", "gt_le=1", "ge_lt=0", "ge=0", "le=1", f"plain={2**63 - 1}"],
    )
    assert (got.ge_le, got.gt_le, got.ge_lt, got.plain) == (0.0, 1.0, 0.0, 2**63 - 1)


@pytest.mark.parametrize("text", ["1e5", "100000.0", "1E5", "1_00_000", "100000"])
def test_integer_keys_take_floats_that_are_exact_integers(text):
    cfg = load_config(None, [f"run.total_steps={text}", "dqn.hidden=[1e2, 64.0]"])
    assert cfg.run.total_steps == 100_000 and type(cfg.run.total_steps) is int
    assert cfg.dqn.hidden == [100, 64] and all(type(h) is int for h in cfg.dqn.hidden)


def test_integer_keys_take_exact_integer_floats_from_toml_files(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[run]\ntotal_steps = 1e5\nseed = 7.0\n[replay]\ncapacity = 2.5e4\n")
    cfg = load_config(path)
    assert (cfg.run.total_steps, cfg.run.seed, cfg.replay.capacity) == (100_000, 7, 25_000)
    assert type(cfg.run.seed) is int


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("1.5", "1.5"),
        ("1e-3", "0.001"),
        ("1e400", "inf"),
        ("-inf", "-inf"),
        ("nan", "nan"),
        ("true", "True"),
        ("'1e5'", "'1e5'"),
        ("2**64", "'2**64'"),
    ],
)
def test_integer_keys_reject_what_is_not_an_integer(text, shown):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"run.total_steps={text}"])
    message = str(e.value)
    assert message.startswith("config key 'run.total_steps': expected an integer")
    assert message.endswith(f"got {shown}") and "\n" not in message


def test_huge_integer_floats_are_out_of_range_not_overflows():
    with pytest.raises(ConfigError, match=r"'run.total_steps': 1e\+300 is out of range"):
        load_config(None, ["run.total_steps=1e300"])
    with pytest.raises(ConfigError, match="'dqn.lr': expected a finite number"):
        load_config(None, ["dqn.lr=" + "9" * 400])  # an int past float's range


@pytest.mark.parametrize("seed", [2**63, 2**64, 2**64 + 1, 10**30, -1])
def test_seed_must_fit_a_signed_64_bit_integer(seed):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"run.seed={seed}"])
    assert str(e.value) == (
        f"config key 'run.seed': {seed} is out of range; allowed: 0 <= value <= {2**63 - 1}"
    )


def test_largest_seed_is_accepted():
    assert load_config(None, [f"run.seed={2**63 - 1}"]).run.seed == 2**63 - 1


def test_every_integer_key_of_every_section_is_held_to_int64():
    """Runner-owned sections included: the int64 range is checked whatever a key's rules."""
    for name, section in Config().sections():
        hints = typing.get_type_hints(type(section))
        for f in dataclasses.fields(section):
            tp = hints[f.name]
            if tp in (int, int | None):
                value = 2**63
            elif tp == list[int]:
                value = [2**63]
            else:
                continue
            with pytest.raises(
                ConfigError,
                match=rf"'{name}\.{f.name}(\[0\])?': 9223372036854775808 is out of range",
            ):
                load_config(None, values={name: {f.name: value}})


@pytest.mark.parametrize(
    ("override", "must_mention"),
    [
        ("replay.capacity=1e18", "0 < value <= 1099511627776"),
        ("dqn.batch_size=1e9", "0 < value <= 16777216"),
        ("dqn.hidden=[1e9]", "'dqn.hidden[0]'"),
        ("run.torch_threads=4294967296", "0 <= value <= 4096"),
        ("env.step_cost_us=1e300", "0.0 <= value <= 1000000000.0"),
        ("replay.alpha=1000", "0.0 <= value <= 10.0"),
    ],
)
def test_sizes_that_numpy_and_torch_would_overflow_are_bounded(override, must_mention):
    with pytest.raises(ConfigError, match="is out of range") as e:
        load_config(None, [override])
    assert must_mention in str(e.value)


def _fields(kind: type) -> list[tuple[str, type, dataclasses.Field]]:
    """(section, dataclass, field) of every ``kind`` key (``kind``, ``kind | None``,
    ``list[kind]``) of every section: the core ones, the runners' and plug-ins' own, and
    ``[sudoku]``, which lives on its own."""
    from shoal.tabular.sudoku_training import SECTION, SudokuConfig

    sections = [(name, type(obj)) for name, obj in Config().sections()]
    found = []
    for name, cls in [*sections, (SECTION, SudokuConfig)]:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] in (kind, kind | None, list[kind]):
                found.append((name, cls, f))
    return found


def _float_fields() -> list[tuple[str, type, dataclasses.Field]]:
    return _fields(float)


def test_every_count_key_has_an_upper_bound():
    """``run.acting_refresh = 1e12`` was accepted: an integer key with no bound but int64's
    takes a slip for "never"; each says how far it goes (or lists its choices)."""
    fields = _fields(int)
    assert len(fields) > 40  # the walk finds the sections' keys
    allowed = {"le", "lt", "choices"}
    unbounded = [f"{n}.{f.name}" for n, _, f in fields if not allowed & set(f.metadata)]
    assert unbounded == []


@pytest.mark.parametrize(
    ("name", "cls", "f"),
    [
        pytest.param(*item, id=f"{item[0]}.{item[2].name}")
        for item in _fields(int)
        if "choices" not in item[2].metadata
    ],
)
def test_a_count_above_its_upper_bound_is_one_line(name, cls, f):
    bound = f.metadata.get("le", f.metadata.get("lt"))
    text = f"[{bound + 1}]" if typing.get_type_hints(cls)[f.name] == list[int] else f"{bound + 1}"
    message = _refused(name, cls, f"{name}.{f.name}={text}")
    assert message.startswith(f"config key '{name}.{f.name}"), message
    assert "is out of range; allowed: " in message and "\n" not in message


def _refused(name: str, cls: type, override: str) -> str:
    """The one-line message ``override`` is refused with (``[sudoku]`` lives on its own)."""
    with pytest.raises(ConfigError) as e:
        if name == "sudoku":
            load_section(cls, name, overrides=[override])
        else:
            load_config(None, [override])
    return str(e.value)


def test_acting_refresh_of_1e12_is_refused():
    with pytest.raises(ConfigError, match="'run.acting_refresh': 1000000000000.0 is out of"):
        load_config(None, ["run.acting_refresh=1e12"])


def test_every_float_key_has_an_upper_bound():
    """``--set dqn.lr=1e300`` trained: a float key with no upper bound takes any finite
    number, however absurd."""
    fields = _float_fields()
    assert len(fields) > 30  # the walk finds the sections' keys
    unbounded = [f"{n}.{f.name}" for n, _, f in fields if not {"le", "lt"} & set(f.metadata)]
    assert unbounded == []


@pytest.mark.parametrize(
    ("name", "cls", "f"),
    [pytest.param(*item, id=f"{item[0]}.{item[2].name}") for item in _float_fields()],
)
def test_a_float_above_its_upper_bound_is_refused(name, cls, f):
    bound = f.metadata.get("le", f.metadata.get("lt"))
    over = bound + max(1.0, abs(bound))
    text = (
        f"[{over!r}, {over!r}]" if typing.get_type_hints(cls)[f.name] == list[float] else repr(over)
    )
    message = _refused(name, cls, f"{name}.{f.name}={text}")
    assert message.startswith(f"config key '{name}.{f.name}"), message
    assert f"{over!r} is out of range; allowed: " in message and "\n" not in message


def test_the_learning_rate_is_bounded_like_adams_steps():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["dqn.lr=1e300"])
    assert str(e.value) == (
        "config key 'dqn.lr': 1e+300 is out of range; allowed: 0.0 < value <= 1.0"
    )
    assert load_config(None, ["dqn.lr=1"]).dqn.lr == 1.0


def test_bad_config_files_name_the_file_on_one_line(tmp_path):
    cases = {
        "bytes.toml": b"\xff\xfe[dqn]\n",
        "latin1.toml": "[run]\nname = 'caf\xe9'\n".encode("latin-1"),
        "decode.toml": b"[dqn\nlr = 1",
        "deep.toml": b"[run]\nname = " + b"[" * 5000 + b"]" * 5000,
        "digits.toml": b"[run]\nseed = " + b"9" * 5000,
    }
    expected = {
        "bytes.toml": "is not UTF-8 text (byte 0xff on line 1, at offset 0)",
        "latin1.toml": "is not UTF-8 text (byte 0xe9 on line 2, at offset 17)",
        "decode.toml": "is not valid TOML: Expected ']'",
        "deep.toml": "is not valid TOML: its values nest too deeply",
        "digits.toml": "is not valid TOML: it holds a number too long",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ConfigError) as e:
            load_config(tmp_path / name)
        message = str(e.value)
        assert message.startswith(f"config file '{tmp_path / name}' {expected[name]}"), message
        assert "\n" not in message


def test_config_files_that_cannot_be_read(tmp_path):
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(ConfigError, match=r"config file '.*dir\.toml' is a directory"):
        load_config(tmp_path / "dir.toml")
    with pytest.raises(ConfigError, match=r"config file '.*gone\.toml' does not exist"):
        load_config(tmp_path / "gone.toml")
    with pytest.raises(ConfigError, match="the path holds a NUL character"):
        load_config("a\x00b.toml")
    with pytest.raises(ConfigError, match="File name too long"):
        load_config("x" * 5000)
    with pytest.raises(ConfigError, match=r"config file 'a\\nb.toml' does not exist"):
        load_config("a\nb.toml")  # the name's newline is escaped: still one line


def test_unreadable_config_file(tmp_path, monkeypatch):
    import builtins
    import errno

    path = tmp_path / "secret.toml"
    path.write_text("[run]\nseed = 1\n")
    real_open = builtins.open

    def denied(file, *args, **kwargs):  # chmod 0 would not stop root, who runs CI
        if str(file) == str(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", denied)
    with pytest.raises(ConfigError, match="cannot be read: Permission denied"):
        load_config(path)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf[run]\nseed = 3\n")
    assert load_config(path).run.seed == 3


@pytest.mark.parametrize(
    ("toml", "must_mention"),
    [
        ("[run]\ntotal_steps = {a = 1}", "'run.total_steps': expected an integer, got {'a': 1}"),
        ("[run]\ntotal_steps = [1, 2]", "'run.total_steps': expected an integer, got [1, 2]"),
        ("[dqn]\nlr = 1979-05-27T07:32:00Z", "'dqn.lr': expected a number, got datetime.datetime("),
        ("[run]\nname = 07:32:00", "'run.name': expected a string, got datetime.time(7, 32)"),
        ("[dqn]\nhidden = {a = 1}", "'dqn.hidden': expected a list of integers"),
        ("[dqn]\nhidden = [[64]]", "'dqn.hidden[0]': expected an integer, got [64]"),
        (
            "[run]\nstop_return = nan",
            "'run.stop_return': expected a finite number or none, got nan",
        ),
        ("[run]\ndevice = 1", "'run.device': expected one of 'auto', 'cpu', 'cuda', got 1"),
        ("run = 3", "'run' must be a table of keys, got 3"),
        ('"a\\nb" = 1', r"unknown config section 'a\nb'"),
        ('[run]\n"x\\ny" = 1', r"unknown config key 'run.x\ny'"),
    ],
)
def test_wrong_types_in_toml_name_the_key(tmp_path, toml, must_mention):
    path = tmp_path / "c.toml"
    path.write_text(toml + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert must_mention in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("override", "must_mention"),
    [
        # TOML would read `1` and drop the second key the newline smuggles in.
        ("dqn.lr=1\nrun.seed=5", r"'dqn.lr': expected a number, got '1\nrun.seed=5'"),
        ("run.total_steps=" + "9" * 5000, "'run.total_steps': expected an integer"),
        ("dqn.hidden=" + "[" * 3000 + "]" * 3000, "'dqn.hidden': expected a list of integers"),
        ("run.name=a\x00b", r"'run.name': 'a\x00b' holds the character '\x00'"),
        ("run.out=\udcff", r"'run.out': '\udcff' holds the character '\udcff'"),
        ('run.name="tab\\there"', r"holds the character '\t'"),
    ],
)
def test_overrides_that_are_not_one_clean_value(override, must_mention):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    message = str(e.value)
    assert must_mention in message and "\n" not in message and len(message) < 400


def test_text_keys_keep_what_toml_would_read_as_another_type():
    cfg = load_config(None, ["run.name=2024", "run.out=nan", "env.id='CartPole-v1'"])
    assert (cfg.run.name, cfg.run.out, cfg.env.id) == ("2024", "nan", "CartPole-v1")


def test_api_misuse_is_a_config_error_too():
    with pytest.raises(ConfigError, match="expected a list of SECTION.KEY=VALUE strings"):
        load_config(None, "dqn.lr=1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="expected a string SECTION.KEY=VALUE"):
        load_config(None, [3])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"'run.seed': <an integer of about \d+ digits>"):
        load_config(None, values={"run": {"seed": 10**5000}})


def test_cli_prints_config_errors_as_one_line(capsys):
    from shoal.cli import main

    code = main(["train", "--set", "dqn.gamma=1.5"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "shoal: error: config key 'dqn.gamma': 1.5 is out of range; allowed: 0.0 <= value <= 1.0\n"
    )


def test_a_borrowed_preset_names_the_run_after_its_env():
    """`shoal train atari --env ALE/Pong-v5` names its runs for Pong, not "atari"; the
    preset's own env keeps the preset's name, and an explicit name always wins."""
    assert load_config("atari").run.name == "atari"
    assert load_config("atari", ["env.id='ALE/Pong-v5'"]).run.name == ""
    assert load_config("cartpole", ["env.id=Acrobot-v1"]).run.name == ""
    kept = load_config("atari", ["env.id='ALE/Pong-v5'", "run.name=atari"])
    assert kept.run.name == "atari"
    assert (
        load_config("atari", ["env.id='ALE/Pong-v5'"], values={"run": {"name": "x"}}).run.name
        == "x"
    )


def test_eval_episodes_default_to_twenty_returns_worth():
    from shoal.config import RunConfig

    assert RunConfig().episodes_per_eval() == 20  # a single-agent env
    assert [RunConfig().episodes_per_eval(k) for k in (2, 8, 20, 64)] == [10, 3, 2, 2]
    assert RunConfig(eval_episodes=7).episodes_per_eval(8) == 7
    assert load_config("cartpole", []).run.episodes_per_eval() == 20


def test_a_config_file_extends_a_preset_or_another_file(tmp_path):
    """`extends` applies the named preset (or a TOML file beside this one) first, then
    this file; the MinAtar games' presets are minatar-breakout's on another game (Asterix
    with the reference DQN's 1-step learning rule, an update per frame)."""
    asterix = load_config("minatar-asterix")
    breakout = load_config("minatar-breakout")
    assert (asterix.env.id, asterix.run.name) == ("MinAtar/Asterix-v1", "minatar-asterix")
    assert load_config("minatar-freeway").dqn == breakout.dqn
    assert (asterix.dqn.n_step, asterix.run.train_freq, breakout.dqn.n_step) == (1, 1, 3)
    same = ("encoder", "hidden", "gamma", "target_period", "max_grad_norm")
    assert all(getattr(asterix.dqn, k) == getattr(breakout.dqn, k) for k in same)
    # Atari 100k keeps the atari preset's Nature network (DER as Dopamine runs it)
    atari, small_budget = load_config("atari"), load_config("atari-100k")
    assert (small_budget.dqn.encoder, small_budget.dqn.hidden) == ("nature", [512])
    assert small_budget.dqn.hidden == atari.dqn.hidden
    assert (small_budget.dqn.n_step, small_budget.run.total_steps) == (10, 100_000)
    (tmp_path / "base.toml").write_text('extends = "cartpole"\n[dqn]\nlr = 0.002\n')
    (tmp_path / "mine.toml").write_text('extends = "base.toml"\n[run]\nseed = 7\n')
    cfg = load_config(tmp_path / "mine.toml", ["dqn.gamma=0.9"])
    assert (cfg.dqn.lr, cfg.run.seed, cfg.dqn.gamma) == (0.002, 7, 0.9)
    assert cfg.dqn.hidden == load_config("cartpole").dqn.hidden
    # another env names the runs after it, as `shoal train atari --env ALE/Pong-v5` does
    (tmp_path / "pong.toml").write_text('extends = "atari"\n[env]\nid = "ALE/Pong-v5"\n')
    assert load_config(tmp_path / "pong.toml").run.name == ""
    (tmp_path / "named.toml").write_text('extends = "pong.toml"\n[run]\nname = "p"\n')
    assert load_config(tmp_path / "named.toml").run.name == "p"
    assert load_config(tmp_path / "base.toml").run.name == "cartpole"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("extends = 3", "'extends' must name a preset"),
        ('extends = ""', "'extends' must name a preset"),
        ('extends = "mine.toml"', "makes a cycle"),
        ('extends = "other.toml"', "makes a cycle"),
        ('extends = "missing.toml"', "'extends' = 'missing.toml': no such preset"),
        ('extends = "a\\u0000b"', "'extends' = .*not a path"),
        ('extends = "cartpole"\n[dqn]\nnope = 1', "unknown config key 'dqn.nope'"),
    ],
)
def test_a_bad_extends_is_one_line_naming_it(tmp_path, text, match):
    (tmp_path / "other.toml").write_text('extends = "mine.toml"\n')
    (tmp_path / "mine.toml").write_text(text + "\n")
    with pytest.raises(ConfigError, match=match) as e:
        load_config(tmp_path / "mine.toml")
    assert "\n" not in str(e.value)
