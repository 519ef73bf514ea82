"""The policies' sweep keys: what each form means, and located one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batch.errors import SweepError
from batch.policies.breaker import BreakerConfig
from batch.policies.halt import HALT_OFF, HaltConfig, HaltRule
from batch.sweep.features.policies import (
    AdaptiveSpec,
    adaptive_key,
    adaptive_snapshot,
    aimd_config,
    breaker_key,
    breaker_snapshot,
    halt_key,
    halt_snapshot,
    resolve_breaker,
)
from batch.sweep.nodes import Node, read_document


def node(tmp_path: Path, yaml: str) -> Node:
    """The node of the key ``k`` in a sweep file holding ``k: <yaml>``."""
    path = tmp_path / "sweep.yaml"
    path.write_text(f"other: 1\nk: {yaml}\n")
    for key, value in read_document(path).entries():
        if key.value == "k":
            return value
    raise AssertionError("no key k")


def located_error(tmp_path: Path, convert: object, yaml: str) -> str:
    with pytest.raises(SweepError) as caught:
        convert(node(tmp_path, yaml))  # type: ignore[operator]
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'sweep.yaml'}:2:")
    assert "\n" not in message
    return message


class TestHalt:
    def test_short_form(self, tmp_path: Path) -> None:
        config = halt_key(node(tmp_path, "now,fail=10%"))
        assert config.rule == HaltRule("now", frozenset({"error", "failed"}), percent=10.0)
        assert config.setup_rule

    @pytest.mark.parametrize("off", ["off", "false"])
    def test_off(self, tmp_path: Path, off: str) -> None:
        assert halt_key(node(tmp_path, off)) == HALT_OFF

    def test_long_form(self, tmp_path: Path) -> None:
        config = halt_key(node(tmp_path, "{rule: 'soon,error=5', broken_setup_window: 12}"))
        assert config == HaltConfig(
            rule=HaltRule("soon", frozenset({"error"}), count=5), setup_window=12
        )
        assert halt_key(node(tmp_path, "{broken_setup: false}")) == HaltConfig(setup_rule=False)

    @pytest.mark.parametrize(
        ("yaml", "message"),
        [("soon,fail=0", "a count must be"), ("'later'", "cannot read halt"),
         ("{rule: off}", "broken_setup: false"), ("{broken_setup_window: 0}", "at least 1"),
         ("{window: 3}", "unknown key 'window'"), ("{broken_setup: 1}", "true or false"),
         ("[1]", "expected off, a rule")],
    )  # fmt: skip
    def test_errors(self, tmp_path: Path, yaml: str, message: str) -> None:
        assert message in located_error(tmp_path, halt_key, yaml)


class TestBreaker:
    def test_sweep_then_model_fields(self, tmp_path: Path) -> None:
        sweep = breaker_key(node(tmp_path, "{threshold: 3, cooldown: 10m}"))
        model = breaker_key(node(tmp_path, "{categories: [api_or_credit]}"))
        assert resolve_breaker(sweep, model) == BreakerConfig(
            threshold=3, categories=frozenset({"api_or_credit"}), cooldown=600.0
        )
        assert resolve_breaker(sweep, None) == BreakerConfig(threshold=3, cooldown=600.0)

    def test_off_for_the_sweep_and_on_for_a_model(self, tmp_path: Path) -> None:
        off = breaker_key(node(tmp_path, "off"))
        assert not resolve_breaker(off, None).enabled
        assert resolve_breaker(off, {"threshold": 2}) == BreakerConfig(threshold=2)
        assert not resolve_breaker({}, off).enabled

    def test_null_cooldown_means_none(self, tmp_path: Path) -> None:
        assert breaker_key(node(tmp_path, "{cooldown: null}")) == {"cooldown": None}

    @pytest.mark.parametrize(
        ("yaml", "message"),
        [("{threshold: 0}", "at least 1"), ("{categories: []}", "is empty"),
         ("{cooldown: 0s}", "cooldown"), ("{treshold: 3}", "did you mean 'threshold'"),
         ("on", "a mapping")],
    )  # fmt: skip
    def test_errors(self, tmp_path: Path, yaml: str, message: str) -> None:
        assert message in located_error(tmp_path, breaker_key, yaml)


class TestAdaptive:
    def test_forms(self, tmp_path: Path) -> None:
        assert adaptive_key(node(tmp_path, "true")) == AdaptiveSpec()
        assert adaptive_key(node(tmp_path, "false")) is None
        spec = adaptive_key(node(tmp_path, "{raise_after: 4, initial: 2}"))
        assert spec == AdaptiveSpec(raise_after=4, initial=2)
        config = aimd_config(spec, 8)
        assert (config.max_concurrent, config.raise_after, config.initial) == (8, 4, 2)

    def test_initial_above_the_ceiling(self) -> None:
        with pytest.raises(ValueError, match="above the model's max_concurrent 2"):
            aimd_config(AdaptiveSpec(initial=3), 2)

    @pytest.mark.parametrize(
        ("yaml", "message"),
        [("yes", "true, false or a mapping"), ("{raise_after: 0}", "at least 1"),
         ("{start: 1}", "unknown key 'start'")],
    )  # fmt: skip
    def test_errors(self, tmp_path: Path, yaml: str, message: str) -> None:
        assert message in located_error(tmp_path, adaptive_key, yaml)


class TestSnapshot:
    """The snapshot of each key reads back to the same config (``load_sweep`` reads it)."""

    @staticmethod
    def yaml_of(value: object) -> str:
        return json.dumps(value)  # JSON is YAML: a flow value on one line

    @pytest.mark.parametrize(
        "text",
        ["off", "soon,fail=3", "now,error=12.5%", "{broken_setup: false}",
         "{rule: 'now,fail=10%', broken_setup_window: 20}", "{broken_setup_window: 3}"],
    )  # fmt: skip
    def test_halt(self, tmp_path: Path, text: str) -> None:
        config = halt_key(node(tmp_path, text))
        again = halt_key(node(tmp_path, self.yaml_of(halt_snapshot(config))))
        assert again == config

    @pytest.mark.parametrize(
        "text",
        ["off", "{}", "{threshold: 2, categories: [b, a], cooldown: 90s}", "{cooldown: null}"],
    )
    def test_breaker(self, tmp_path: Path, text: str) -> None:
        fields = breaker_key(node(tmp_path, text))
        again = breaker_key(node(tmp_path, self.yaml_of(breaker_snapshot(fields))))
        assert again == fields

    @pytest.mark.parametrize(
        "text", ["true", "false", "{raise_after: 3}", "{initial: 1, raise_after: 2}"]
    )
    def test_adaptive(self, tmp_path: Path, text: str) -> None:
        spec = adaptive_key(node(tmp_path, text))
        again = adaptive_key(node(tmp_path, self.yaml_of(adaptive_snapshot(spec))))
        assert again == spec
