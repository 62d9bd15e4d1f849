"""A study's ``journal.log`` checked against what shoal tune writes, before a resume
touches anything: every line one of Optuna's journal records (the operation its
``op_code`` names, with the fields of their types that Optuna replays), and, once
Optuna has read them, every trial's parameters of the study's space and every value
shoal reads back (its own user attrs) of the type it wrote. A file that is valid JSON
but not such a record is one line naming it, never a traceback from deep in Optuna's
replay or a study that fails an hour in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal.errors import ConfigError, first_line

__all__ = ["check_record", "check_trials"]

_NUMBER = (int, float)
_INT = (int,)
_STR = (str,)
_TABLE = (dict,)
_LIST = (list,)
_NONE = (type(None),)

_RECORDS: dict[int, dict[str, tuple[type, ...]]] = {
    0: {"study_name": _STR, "directions": _LIST},  # create study
    1: {"study_id": _INT},  # delete study
    2: {"study_id": _INT, "user_attr": _TABLE},
    3: {"study_id": _INT, "system_attr": _TABLE},
    4: {"study_id": _INT, "datetime_start": _STR + _NONE},  # create trial
    5: {  # set a trial's parameter
        "trial_id": _INT,
        "param_name": _STR,
        "param_value_internal": _NUMBER,
        "distribution": _STR,
    },
    6: {"trial_id": _INT, "state": _INT, "values": _LIST + _NONE},  # set state, values
    7: {"trial_id": _INT, "step": _INT, "intermediate_value": _NUMBER},
    8: {"trial_id": _INT, "user_attr": _TABLE},
    9: {"trial_id": _INT, "system_attr": _TABLE},
    10: {},  # discard trials (Optuna skips it)
}
"""Optuna's journal operations (``JournalOperation``) -> the fields its replay reads."""

_OPTIONAL: dict[str, tuple[type, ...]] = {
    "datetime_complete": _STR,
    "state": _INT,
    "distributions": _TABLE,
    "params": _TABLE,
    "user_attrs": _TABLE,
    "system_attrs": _TABLE,
    "intermediate_values": _TABLE,
    "value": _NUMBER + _NONE,
}
"""Fields a record may have besides, of these types (a created trial's template)."""

_TRIAL_ATTRS: dict[str, tuple[type, ...]] = {
    "env_steps": _INT,
    "updates": _INT,
    "evals": _LIST,
    "error": _STR,
    "untrained": _NUMBER + _NONE,
    "beat_untrained": (bool,),
    "doubt": _STR,
    "startup_point": _INT,
    "train_s": _NUMBER,
}
"""The user attrs shoal writes on a trial and reads back."""

_STUDY_ATTRS: dict[str, tuple[type, ...]] = {"wall_s": _NUMBER, "requeued": _LIST}


def _is(value: Any, types: tuple[type, ...]) -> bool:
    """``value`` is of one of ``types`` (a bool is no number: JSON's true is not 1)."""
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def check_record(record: Any) -> str:
    """What keeps ``record`` (a journal line's JSON) from being an Optuna record that
    Optuna replays ('': nothing)."""
    if not isinstance(record, Mapping):
        return f"a JSON {type(record).__name__}, not an object"
    op = record.get("op_code")
    if not _is(op, _INT) or op not in _RECORDS:
        return f"op_code {op!r} is not one of Optuna's operations (0 to {len(_RECORDS) - 1})"
    fields = {"worker_id": _STR, **_RECORDS[op]}
    if op == 6:  # a trial that starts has a start time; one that ends, an end time
        state = record.get("state")
        fields.update({"datetime_start": _STR} if state == 0 else {})
        fields.update({"datetime_complete": _STR} if state in (1, 2, 3) else {})
    for key, types in fields.items():
        if key not in record:
            return f"operation {op} has no {key!r}"
        if not _is(record[key], types):
            return f"operation {op}'s {key!r} is {record[key]!r}"
    for key, types in _OPTIONAL.items():
        if key in record and key not in fields and not _is(record[key], types):
            return f"operation {op}'s {key!r} is {record[key]!r}"
    return ""


def check_trials(study: Any, dimensions: Mapping[str, Any], where: str) -> None:
    """One line unless every trial of ``study`` (read, not written) has parameters of the
    study's space (``dimensions``: its keys -> :class:`Dimension`) and shoal's user attrs
    of the types shoal wrote, and the study its own."""
    from optuna.distributions import check_distribution_compatibility

    for key, value in study.user_attrs.items():
        if key in _STUDY_ATTRS and not _is(value, _STUDY_ATTRS[key]):
            raise ConfigError(f"{where}: the study's {key!r} is {value!r}, not what shoal wrote")
    for t in study.get_trials(deepcopy=False):
        for key, value in t.user_attrs.items():
            if key in _TRIAL_ATTRS and not _is(value, _TRIAL_ATTRS[key]):
                raise ConfigError(
                    f"{where}: trial {t.number}'s {key!r} is {value!r}, not what shoal wrote"
                )
        for name, distribution in t.distributions.items():
            if name not in dimensions:
                raise ConfigError(
                    f"{where}: trial {t.number} has parameter {name!r}, which the study's "
                    f"space does not search (it searches {', '.join(dimensions)})"
                )
            try:
                check_distribution_compatibility(dimensions[name].distribution(), distribution)
            except ValueError as e:
                raise ConfigError(
                    f"{where}: trial {t.number}'s parameter {name!r} is not of the study's "
                    f"space ({first_line(e)})"
                ) from None
