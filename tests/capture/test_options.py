"""The whitelist schema of capture params (enforced by the server and again by the agent)."""

import json

import pytest

from pypto_core.capture.options import (
    ENV_OPTIONS,
    CaptureOptions,
    OptionsError,
    options_from_env,
    schema_description,
    validate_params,
)


def test_defaults_are_the_light_capture() -> None:
    opts = validate_params({})
    assert opts == CaptureOptions()
    assert (opts.profiler_level, opts.aic_metrics, opts.l2_cache, opts.scheduled) == \
        ("Level1", "PipeUtilization", False, False)


def test_allowed_values_pass_through() -> None:
    opts = validate_params({"profiler_level": "Level2", "aic_metrics": "MemoryAccess", "l2_cache": True,
                            "warmup": 1, "active": 3, "export_type": "db"})
    assert opts.profiler_level == "Level2" and opts.aic_metrics == "MemoryAccess" and opts.l2_cache
    assert opts.scheduled and opts.active == 3 and opts.export_type == "db"


@pytest.mark.parametrize("params, key", [
    ({"command": "rm -rf /"}, "params.command"),            # not an option at all
    ({"profiler_level": "Level9"}, "params.profiler_level"),
    ({"aic_metrics": "pipeutilization"}, "params.aic_metrics"),  # case matters: torch_npu enum names
    ({"active": -1}, "params.active"),
    ({"active": 10**6}, "params.active"),
    ({"active": True}, "params.active"),                    # a bool is not a step count
    ({"l2_cache": 1}, "params.l2_cache"),                   # nor an int a flag
    ({"warmup": "2"}, "params.warmup"),
])
def test_outside_the_schema_is_refused_naming_the_key(params, key) -> None:
    with pytest.raises(OptionsError, match=key.replace(".", r"\.")):
        validate_params(params)


def test_not_an_object_is_refused() -> None:
    with pytest.raises(OptionsError):
        validate_params(["active", 3])  # type: ignore[arg-type]


def test_env_round_trip_and_refusal() -> None:
    assert options_from_env({}) is None
    opts = options_from_env({ENV_OPTIONS: json.dumps({"active": 2, "with_stack": True})})
    assert opts is not None and opts.active == 2 and opts.with_stack
    with pytest.raises(OptionsError):
        options_from_env({ENV_OPTIONS: json.dumps({"evil": 1})})


def test_schema_description_lists_every_option_once() -> None:
    names = [item["name"] for item in schema_description()]
    assert sorted(names) == sorted(CaptureOptions().to_dict())
    level = next(i for i in schema_description() if i["name"] == "profiler_level")
    assert "Level0" in level["choices"] and level["default"] == "Level1"
