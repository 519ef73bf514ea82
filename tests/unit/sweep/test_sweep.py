"""The sweep file: loading, located errors, ${VAR} env, argv expansion and the snapshot."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from helpers.bad_sweeps import BAD_SWEEPS, BROKEN
from helpers.paths import REPO_ROOT
from ruamel.yaml import YAML

from batch.errors import SweepError
from batch.sweep.load import (
    DEFAULT_LOG_PATTERNS,
    CaseSpec,
    ModelSpec,
    expand_command,
    load_sweep,
)
from batch.sweep.secrets import REDACTED
from batch.sweep.snapshot import sweep_snapshot
from run_support.results import NON_MODEL_FAILURE_CATEGORIES

#: Every secret value the corpus writes literally contains this; no message may show it.
WRITTEN_SECRET = "sk-written-in-the-file"

MINIMAL = 'cases: [c01]\nmodels: [mock/oracle]\ncommand: [python, agent.py, "{case}"]\n'

# Names a user may well have: provider prefixes, tags, spaces, quotes, shell syntax, path
# tricks, a long one, non-ASCII, and strings YAML would otherwise read as something else.
AWKWARD_NAMES = [
    "openai/gpt-4o",
    "qwen3:8b",
    "with space",
    'double"quote',
    "single'quote",
    "$(touch pwned)",
    "`id`",
    "a;b && c | d",
    "../../etc/passwd",
    "n" * 200,
    "modèle-ünïcødé",
    "日本語モデル",
    "{case}",
    "-rf",
    "#not-a-comment",
    "key: value",
    "null",
    "true",
    "~",
    "007",
]


def write(directory: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, **environ: str) -> object:
    return load_sweep(write(tmp_path, text), environ=environ)


def error_of(tmp_path: Path, text: str, **environ: str) -> str:
    with pytest.raises(SweepError) as info:
        load_sweep(write(tmp_path, text), environ=environ)
    return str(info.value)


# --- broken sweeps ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("error")  # a warning would be more lines, on stderr
@pytest.mark.parametrize(("name", "where", "fragment"), [(k, *v) for k, v in BROKEN.items()])
def test_broken_sweep_is_one_located_line(name: str, where: str, fragment: str) -> None:
    path = BAD_SWEEPS / name
    with pytest.raises(SweepError) as info:
        load_sweep(path, environ={})
    message = str(info.value)
    assert message.startswith(f"{path}:{where}: ")
    assert fragment in message
    assert "\n" not in message
    assert WRITTEN_SECRET not in message


def test_every_broken_sweep_in_the_corpus_has_an_expectation() -> None:
    assert sorted(p.name for p in BAD_SWEEPS.iterdir()) == sorted(BROKEN)


def test_error_names_the_file_as_the_user_gave_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "cases: [c01]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SweepError, match=r"^sweep\.yaml:1:1: missing required key 'models'$"):
        load_sweep("sweep.yaml")


def limit_memory() -> None:
    """In the child: 2 GiB of address space, so an expanding alias bomb fails fast."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize(
    "name",
    [
        "too_deep_list.yaml",
        "python_tag.yaml",
        "alias_bomb.yaml",
        "secret_duplicate_key.yaml",
        "secret_reused_anchor.yaml",
    ],
)
def test_the_command_line_reports_a_hostile_sweep_in_one_line(tmp_path: Path, name: str) -> None:
    (tmp_path / "sweep.yaml").write_bytes((BAD_SWEEPS / name).read_bytes())
    root = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "batch.cli", "sweep.yaml", "--no-progress"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": root},
        timeout=60,
        preexec_fn=limit_memory,
    )
    where, fragment = BROKEN[name]
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sweep.yaml:{where}: ")
    assert fragment in line
    assert WRITTEN_SECRET not in result.stdout + result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.yaml"]  # no runs/ batch dir


def test_missing_file_is_an_error_without_a_location(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    assert str(info.value) == f"{path}: cannot read the sweep file: No such file or directory"


def test_a_directory_is_not_a_sweep_file(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="cannot read the sweep file: Is a directory"):
        load_sweep(tmp_path)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("retries: 1.5", "retries: expected an integer (at least 0), got a number (1.5)"),
        ("max_concurrent: true", "max_concurrent: expected an integer (at least 1), got a boolean"),
        ("stagger: [1s]", "stagger: expected a duration"),
        ("timeout: 0", "timeout: must be more than 0 (null means no limit)"),
        ("env: [A=1]", "env: expected a mapping, got a list"),
        ("env: {A: null}", 'env.A: expected a string (write "" for an empty value), got null'),
        (
            "log_patterns: {api_or_credit: rate limit}",
            "log_patterns.api_or_credit: expected a list",
        ),
        ("non_model_categories: [infra_failure, '']", "non_model_categories[1]: empty string"),
        ("name: [a]", "name: expected a name (a string or number), got a list"),
        ("output: ''", "output: empty path"),
    ],
)
def test_wrong_values_say_what_was_expected_and_what_was_found(
    tmp_path: Path, extra: str, fragment: str
) -> None:
    message = error_of(tmp_path, MINIMAL + extra + "\n")
    assert message.startswith(f"{tmp_path / 'sweep.yaml'}:4:")
    assert fragment in message


def test_empty_value_is_located_at_its_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cases:\nmodels: [m]\ncommand: [x]\n")
    assert message.endswith(
        ":1:1: cases: expected a list of case ids or objects, or {dir: ..., glob: ...}, got null"
    )


def test_command_must_not_be_a_single_empty_program(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cases: [c]\nmodels: [m]\ncommand: ['', x]\n")
    assert message.endswith(":3:10: command[0]: the program is empty")


def test_format_specs_are_not_placeholders(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cases: [c]\nmodels: [m]\ncommand: [x, '{case:>10}']\n")
    assert "command[1]: format specs and conversions are not supported" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (MINIMAL + 'env: {"A\\nB": [x]}', 'env.A\\nB: expected a string (write "" for an'),
        (MINIMAL + 'log_patterns: {"\\e[31ma": x}', "log_patterns.\\x1b[31ma: expected a list"),
        (MINIMAL + 'env: {A: "${X\\rY}"}', "env.A: '${X\\rY}' is not a variable reference"),
        ('cases: [c]\nmodels: [m]\ncommand: [x, "{ca\\nse}"]', "unknown placeholder {ca\\nse}"),
    ],
)
def test_control_characters_from_the_file_are_escaped_in_messages(
    tmp_path: Path, text: str, fragment: str
) -> None:
    message = error_of(tmp_path, text + "\n")
    assert fragment in message
    assert message.isprintable()  # no line break, no terminal escape


def block_mappings(levels: int, indent: int) -> str:
    """``levels`` block mappings, each the value of ``k`` in the one before."""
    return "".join(f"\n{' ' * (indent + level)}k:" for level in range(levels)) + " 1"


DEEP = 3000
#: Nesting deep enough to exhaust Python's stack if read recursively, in each YAML style.
DEEP_SHAPES = {
    "block mappings in params": "cases:\n  - id: c\n    params:" + block_mappings(DEEP, 6)
    + "\nmodels: [m]\ncommand: [x]\n",
    "flow mappings in a model's env": "cases: [c]\nmodels: [{id: m, env: "
    + "{A: " * DEEP + "x" + "}" * DEEP + "}]\ncommand: [x]\n",
    "block lists in the command": "cases: [c]\nmodels: [m]\ncommand:"
    + "".join(f"\n{' ' * level}-" for level in range(DEEP)) + " x\n",
    "flow lists as a mapping key": MINIMAL + "env: {? " + "[" * DEEP + "]" * DEEP + " : x}\n",
}  # fmt: skip


@pytest.mark.parametrize("shape", sorted(DEEP_SHAPES))
def test_deep_nesting_is_a_located_error(tmp_path: Path, shape: str) -> None:
    message = error_of(tmp_path, DEEP_SHAPES[shape])
    assert re.fullmatch(
        r".*sweep\.yaml:\d+:\d+: nesting too deep \(more than 100 levels of lists and mappings\)",
        message,
    )


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    # The top-level mapping is one level: 98 mappings and a list make 100.
    message = error_of(tmp_path, MINIMAL + "log_patterns: " + "{a: " * 98 + "[x]" + "}" * 98)
    assert message.endswith(":4:19: log_patterns.a: expected a list of strings, got a mapping")


# --- good sweeps -----------------------------------------------------------------------------


def test_minimal_sweep_gets_the_documented_defaults(tmp_path: Path) -> None:
    sweep = load_text(tmp_path, MINIMAL)
    assert sweep.cases == (CaseSpec("c01"),)
    assert sweep.models == (ModelSpec("mock/oracle"),)
    assert sweep.command == ("python", "agent.py", "{case}")
    assert sweep.output == (tmp_path / "runs").resolve()
    assert (sweep.name, sweep.timeout, sweep.kill_grace) == (None, None, 10.0)
    assert (sweep.max_concurrent, sweep.stagger, sweep.order) == (4, 0.0, "interleave")
    assert (sweep.retries, sweep.retry_backoff, sweep.summary_interval) == (0, 30.0, 2.0)
    assert sweep.non_model_categories == NON_MODEL_FAILURE_CATEGORIES
    assert sweep.log_patterns == DEFAULT_LOG_PATTERNS
    assert sweep.env == {}


DESIGN_EXAMPLE = """\
name: demo                      # optional; part of the batch dir name
output: runs                    # output root, relative to the sweep file
cases:                          # list of ids / objects, or {dir: ..., glob: ...} discovery
  - c01
  - {id: c02, timeout: 5m, params: {difficulty: hard}}
models:
  - mock/oracle
  - {id: "qwen3:8b", max_concurrent: 1, env: {BASE_URL: "http://127.0.0.1:1234/v1"}}
command: [python, agent.py, "{case}", "{model}", --out, "{run_dir}"]   # argv, no shell
timeout: 30m                    # per job; a case may override
kill_grace: 10s                 # SIGTERM, wait this long, then SIGKILL the process group
max_concurrent: 4
stagger: 0s                     # minimum gap between two job starts
order: interleave               # interleave (cases outer, models inner) | model-major
retries: 0                      # automatic reruns of non-model failures inside one invocation
retry_backoff: 30s              # doubles per retry, capped at 1h
non_model_categories: [infra_failure, api_or_credit, task_data, build_instruction]
"""


def test_the_design_example_loads(tmp_path: Path) -> None:
    sweep = load_text(tmp_path, DESIGN_EXAMPLE)
    assert sweep.name == "demo"
    assert sweep.cases == (
        CaseSpec("c01"),
        CaseSpec("c02", timeout=300.0, params={"difficulty": "hard"}),
    )
    qwen = sweep.model("qwen3:8b")
    assert qwen.max_concurrent == 1
    assert qwen.env == {"BASE_URL": "http://127.0.0.1:1234/v1"}
    assert sweep.command == ("python", "agent.py", "{case}", "{model}", "--out", "{run_dir}")
    assert (sweep.timeout, sweep.kill_grace, sweep.stagger, sweep.retry_backoff) == (
        1800.0,
        10.0,
        0.0,
        30.0,
    )


def test_every_key_takes_a_non_default_value(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path,
        MINIMAL
        + "max_concurrent: 2\nstagger: 250ms\norder: model-major\nretries: 3\n"
        + "retry_backoff: 1m\nkill_grace: 2\nsummary_interval: 0.5s\ntimeout: null\n"
        + "non_model_categories: [infra_failure, my_flaky_harness]\n"
        + "log_patterns: {api_or_credit: [quota exceeded], infra_failure: [OOMKilled]}\n",
    )
    assert (sweep.max_concurrent, sweep.stagger, sweep.order) == (2, 0.25, "model-major")
    assert (sweep.retries, sweep.retry_backoff, sweep.kill_grace) == (3, 60.0, 2.0)
    assert (sweep.summary_interval, sweep.timeout) == (0.5, None)
    assert sweep.non_model_categories == {"infra_failure", "my_flaky_harness"}
    # Given patterns replace the defaults, so a user can also switch them off.
    assert sweep.log_patterns == {
        "api_or_credit": ("quota exceeded",),
        "infra_failure": ("OOMKilled",),
    }


def test_output_is_relative_to_the_sweep_file_not_the_working_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sweeps").mkdir()
    monkeypatch.chdir(Path("/"))
    path = write(tmp_path / "sweeps", MINIMAL + "output: ../results\n")
    assert load_sweep(path).output == (tmp_path / "results").resolve()


def test_anchors_aliases_and_merge_keys_are_read(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path,
        "cases: [c01]\nmodels:\n"
        '  - &local {id: "qwen3:8b", max_concurrent: 1, env: {BASE_URL: "http://h:1234/v1"}}\n'
        '  - {<<: *local, id: "llama3:8b"}\n'
        "command: [x]\n"
        'log_patterns: {api_or_credit: &limits ["429", quota], infra_failure: *limits}\n',
    )
    assert attrs.evolve(sweep.model("llama3:8b"), id="qwen3:8b") == sweep.model("qwen3:8b")
    limits = ("429", "quota")
    assert sweep.log_patterns == {"api_or_credit": limits, "infra_failure": limits}


def test_standard_tags_are_read_and_dates_are_text(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path,
        "cases: [!!str 007, 2026-01-01, 2026-01-01 10:00:00]\nmodels: [!!str 1.10]\n"
        "command: !!seq [x]\nmax_concurrent: !!int '3'\nstagger: !!float 1\n"
        "env: !!map {RUN_DATE: 2026-11-30}\n",
    )
    assert [case.id for case in sweep.cases] == ["007", "2026-01-01", "2026-01-01 10:00:00"]
    assert sweep.models[0].id == "1.10"
    assert (sweep.command, sweep.max_concurrent, sweep.stagger) == (("x",), 3, 1.0)
    assert sweep.env == {"RUN_DATE": "2026-11-30"}
    snapshot = write(tmp_path, sweep_snapshot(sweep), "snapshot.yaml")
    assert attrs.evolve(load_sweep(snapshot), path=sweep.path) == sweep


def test_numbers_are_taken_exactly_as_written(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path,
        "cases: [007, 1.10, 42, {id: 0x1F}]\nmodels: [3.5]\n"
        'command: [python, agent.py, --seed, 042, "{case}"]\n',
    )
    assert [case.id for case in sweep.cases] == ["007", "1.10", "42", "0x1F"]
    assert sweep.models[0].id == "3.5"
    assert sweep.command[3] == "042"


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_awkward_names_load_verbatim(tmp_path: Path, name: str) -> None:
    quoted = json.dumps(name, ensure_ascii=False)  # a JSON string is a YAML string
    sweep = load_text(
        tmp_path, f'cases: [{quoted}]\nmodels: [{quoted}]\ncommand: [x, "{{case}}"]\n'
    )
    assert sweep.cases[0].id == name
    assert sweep.models[0].id == name


def test_each_name_reaches_a_real_process_as_one_argument(tmp_path: Path) -> None:
    cases = ", ".join(json.dumps(name, ensure_ascii=False) for name in AWKWARD_NAMES)
    probe = "import json, sys; print(json.dumps(sys.argv[1:]))"
    sweep = load_text(
        tmp_path,
        f"cases: [{cases}]\nmodels: [qwen3:8b]\n"
        f"command: [{json.dumps(sys.executable)}, -c, {probe!r}, "
        '"{case}", "--tag={case}@{model}"]\n',
    )
    for case in sweep.cases:
        argv = expand_command(sweep.command, {"case": case.id, "model": "qwen3:8b"}, case.params)
        out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tmp_path).stdout
        assert json.loads(out) == [case.id, f"--tag={case.id}@qwen3:8b"]
    assert not (tmp_path / "pwned").exists()


def test_expand_command_fills_every_placeholder_and_keeps_literal_braces() -> None:
    command = ("run", "{case}", "{{not a placeholder}}", "--level={params.level}", "{params.on}")
    command += ("{model}", "{model_safe}", "{run_dir}", "{batch_dir}", "a{attempt}")
    values = {
        "case": "c1",
        "model": "openai/gpt-4o",
        "model_safe": "openai--gpt-4o",
        "run_dir": "/r/x",
        "batch_dir": "/r",
        "attempt": 2,
    }
    argv = expand_command(command, values, {"level": 3, "on": True})
    assert argv == [
        "run",
        "c1",
        "{not a placeholder}",
        "--level=3",
        "true",
        "openai/gpt-4o",
        "openai--gpt-4o",
        "/r/x",
        "/r",
        "a2",
    ]


def test_params_placeholder_loads_when_every_case_sets_it(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path,
        "cases:\n  - {id: a, params: {level: 1, tag: x}}\n  - {id: b, params: {level: 2}}\n"
        'models: [m]\ncommand: [x, "--level={params.level}"]\n',
    )
    assert [case.params for case in sweep.cases] == [{"level": 1, "tag": "x"}, {"level": 2}]


def test_case_timeout_overrides_and_is_a_duration(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path, "cases: [a, {id: b, timeout: 1h30m}]\nmodels: [m]\ncommand: [x]\ntimeout: 5m\n"
    )
    assert [case.timeout for case in sweep.cases] == [None, 5400.0]


def test_cases_discovered_from_a_directory(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("b.json", "a.json", "notes.txt", ".hidden.json"):
        (tasks / name).write_text("{}")
    (tasks / "c_dir").mkdir()
    everything = load_text(tmp_path, MINIMAL.replace("[c01]", "{dir: tasks, glob: '*'}"))
    assert [case.id for case in everything.cases] == ["a", "b", "c_dir", "notes"]
    json_only = load_text(tmp_path, MINIMAL.replace("[c01]", "{dir: tasks, glob: '*.json'}"))
    assert [case.id for case in json_only.cases] == ["a", "b"]


def test_discovery_that_yields_one_id_twice_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    for name in ("a.json", "a.yaml"):
        (tmp_path / "tasks" / name).write_text("")
    message = error_of(tmp_path, MINIMAL.replace("[c01]", "{dir: tasks, glob: 'a.*'}"))
    assert message.endswith(":1:27: cases.glob: a.json and a.yaml both give case id 'a'")


def test_discovery_of_a_file_name_that_is_not_utf8_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    """A non-UTF-8 name would be a case id with lone surrogates: no summary could hold it."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "good.json").write_text("{}")
    (tmp_path / "tasks" / os.fsdecode(b"bad\xff.json")).write_text("{}")
    message = error_of(tmp_path, MINIMAL.replace("[c01]", "{dir: tasks, glob: '*.json'}"))
    assert message.endswith(
        f":1:27: cases.glob: {tmp_path / 'tasks'}/bad\\xff.json: the file name is not UTF-8, "
        "so it cannot be a case id (rename it, or narrow the glob)"
    )


def test_discovery_in_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    message = error_of(tmp_path, MINIMAL.replace("[c01]", "{dir: nowhere, glob: '*'}"))
    assert f":1:14: cases.dir: {tmp_path / 'nowhere'} is not a directory" in message


# --- env and ${VAR} --------------------------------------------------------------------------

ENV_SWEEP = """\
cases: [c01]
models:
  - id: openai/gpt-4o
    env: {OPENAI_API_KEY: "${OPENAI_KEY_FOR_TESTS}"}
  - mock/oracle
command: [x]
env:
  AUTH_HEADER: "Bearer ${TOKEN}"
  LITERAL: "$${NOT_EXPANDED}"
  PORT: 8080
  HF_TOKEN: hf_written_in_the_file
"""


def test_env_values_expand_from_the_environment(tmp_path: Path) -> None:
    sweep = load_text(tmp_path, ENV_SWEEP, OPENAI_KEY_FOR_TESTS="sk-test-123", TOKEN="t0k3n")
    assert sweep.env == {
        "AUTH_HEADER": "Bearer t0k3n",
        "LITERAL": "${NOT_EXPANDED}",
        "PORT": "8080",
        "HF_TOKEN": "hf_written_in_the_file",
    }
    assert sweep.env_templates["AUTH_HEADER"] == "Bearer ${TOKEN}"
    assert sweep.model("openai/gpt-4o").env == {"OPENAI_API_KEY": "sk-test-123"}


def test_env_booleans_and_numbers_reach_the_job_as_written(tmp_path: Path) -> None:
    text = MINIMAL + (
        "env: {FLAG: true, OFF: false, LOUD: TRUE, TAGGED: !!bool True, WORD: yes, ON: on,\n"
        "      RATIO: 1.0, ZIP: 007, BIG: 1e3, HEX: 0x1F}\n"
    )
    sweep = load_text(tmp_path, text)
    assert sweep.env == {
        "FLAG": "true",
        "OFF": "false",
        "LOUD": "TRUE",
        "TAGGED": "true",  # a tag leaves no spelling to keep: YAML's own
        "WORD": "yes",  # YAML 1.2: a string anyway
        "ON": "on",
        "RATIO": "1.0",
        "ZIP": "007",
        "BIG": "1e3",
        "HEX": "0x1F",
    }
    assert sweep.env_templates["FLAG"] == "true"


def test_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCH_LEDGER_TEST_SECRET", "from-os-environ")
    sweep = load_sweep(write(tmp_path, MINIMAL + 'env: {K: "${BATCH_LEDGER_TEST_SECRET}"}\n'))
    assert sweep.env == {"K": "from-os-environ"}


def test_unset_variable_names_the_env_key_and_the_variable(tmp_path: Path) -> None:
    message = error_of(tmp_path, ENV_SWEEP, TOKEN="t")
    assert message.endswith(
        ":4:27: models[0].env.OPENAI_API_KEY: environment variable OPENAI_KEY_FOR_TESTS is not "
        "set (referenced as ${OPENAI_KEY_FOR_TESTS})"
    )


def sweep_env(env: str) -> str:
    return MINIMAL + f"env: {env}\n"


def model_env(env: str) -> str:
    return MINIMAL.replace("[mock/oracle]", f"[{{id: m, env: {env}}}]")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            sweep_env('{OPENAI_API_KEY: "sk-abc123secret${"}'),
            "env.OPENAI_API_KEY: unterminated '${' in the value (not shown: secret)",
        ),
        (
            model_env('{HF_TOKEN: "x ${sk-abc123secret"}'),
            "models[0].env.HF_TOKEN: unterminated '${' in the value (not shown: secret)",
        ),
        (
            model_env('{apiKey: "${sk-abc123secret}"}'),
            "models[0].env.apiKey: a '${' in the value (not shown: secret) is not a variable",
        ),
        (
            sweep_env('{DB_PASSWORD: "${abc123secret:-x}"}'),
            "env.DB_PASSWORD: a '${' in the value (not shown: secret) is not a variable",
        ),
        (
            model_env("{API_KEY: sk-abc123secret, API_KEY: sk-abc123secret2}"),
            'not valid YAML: found duplicate key "API_KEY" (while constructing a mapping',
        ),
        (
            sweep_env("\n  HF_TOKEN: sk-abc123secret\n  HF_TOKEN: x"),
            'not valid YAML: found duplicate key "HF_TOKEN" (while constructing a mapping',
        ),
    ],
)
def test_an_error_never_shows_a_secret_written_in_the_file(
    tmp_path: Path, text: str, fragment: str
) -> None:
    message = error_of(tmp_path, text)
    assert fragment in message
    assert "abc123secret" not in message


def test_an_error_still_shows_a_value_whose_name_is_not_secret(tmp_path: Path) -> None:
    message = error_of(tmp_path, sweep_env('{BASE_URL: "http://h/${"}'))
    assert ":4:17: env.BASE_URL: unterminated '${' in 'http://h/${' (write $${ " in message


# --- the snapshot ----------------------------------------------------------------------------

FULL_SWEEP = """\
name: nightly
output: out
cases:
  - c01
  - {id: "a/b: c;$(x)", timeout: 90s, params: {difficulty: hard, n: 3, strict: true}}
  - 007
models:
  - openai/gpt-4o
  - {id: "qwen3:8b", max_concurrent: 1, env: {OPENAI_API_KEY: "${KEY}", BASE_URL: "http://h/v1"}}
command: [python, agent.py, "{case}", "{model}", --out, "{run_dir}", "{{x}}"]
env: {AUTH: "Bearer ${TOKEN}", LITERAL: "$${X}", MODE: fast}
timeout: 30m
kill_grace: 5s
max_concurrent: 3
stagger: 250ms
order: model-major
retries: 2
retry_backoff: 1m
non_model_categories: [infra_failure, api_or_credit]
log_patterns: {api_or_credit: ["429", quota]}
summary_interval: 1s
"""
ENVIRON = {"KEY": "sk-live-secret-value", "TOKEN": "tok-secret-value"}


def test_snapshot_round_trips_through_load_sweep(tmp_path: Path) -> None:
    sweep = load_text(tmp_path, FULL_SWEEP, **ENVIRON)
    snapshot = write(tmp_path, sweep_snapshot(sweep), "snapshot.yaml")
    again = load_sweep(snapshot, environ=ENVIRON)
    assert attrs.evolve(again, path=sweep.path) == sweep


@pytest.mark.parametrize(
    "executor", ["executor: dask", 'executor: {kind: dask, scheduler: "tcp://10.0.0.5:8786"}']
)
def test_snapshot_records_a_non_default_executor(tmp_path: Path, executor: str) -> None:
    sweep = load_text(tmp_path, FULL_SWEEP + executor + "\n", **ENVIRON)
    snapshot = write(tmp_path, sweep_snapshot(sweep), "snapshot.yaml")
    again = load_sweep(snapshot, environ=ENVIRON)
    assert again.executor == sweep.executor
    assert attrs.evolve(again, path=sweep.path) == sweep


def test_snapshot_leaves_out_the_default_executor(tmp_path: Path) -> None:
    sweep = load_text(tmp_path, MINIMAL + "executor: {kind: local}\n")
    assert "executor" not in YAML(typ="safe").load(sweep_snapshot(sweep))


def test_snapshot_of_discovered_cases_lists_them(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    for name in ("t2.md", "t1.md"):
        (tmp_path / "tasks" / name).write_text("")
    sweep = load_text(tmp_path, MINIMAL.replace("[c01]", "{dir: tasks, glob: '*.md'}"))
    (tmp_path / "tasks" / "t3.md").write_text("")  # added later: the snapshot is fixed
    again = load_sweep(write(tmp_path, sweep_snapshot(sweep), "snapshot.yaml"))
    assert [case.id for case in again.cases] == ["t1", "t2"]


def test_snapshot_has_every_key_resolved(tmp_path: Path) -> None:
    data = YAML(typ="safe").load(sweep_snapshot(load_text(tmp_path, FULL_SWEEP, **ENVIRON)))
    assert list(data) == [
        "name",
        "output",
        "cases",
        "models",
        "command",
        "env",
        "timeout",
        "kill_grace",
        "max_concurrent",
        "stagger",
        "order",
        "retries",
        "retry_backoff",
        "non_model_categories",
        "log_patterns",
        "summary_interval",
    ]
    assert data["output"] == str((tmp_path / "out").resolve())
    assert (data["timeout"], data["stagger"], data["retry_backoff"]) == (1800, 0.25, 60)
    assert data["cases"][0] == {"id": "c01", "params": {}}
    assert data["cases"][1]["timeout"] == 90
    assert data["models"][0] == {"id": "openai/gpt-4o", "max_concurrent": None, "env": {}}


def test_snapshot_never_holds_a_secret_value(tmp_path: Path) -> None:
    sweep = load_text(
        tmp_path, ENV_SWEEP, OPENAI_KEY_FOR_TESTS="sk-test-123456", TOKEN="t0k3n-secret"
    )
    text = sweep_snapshot(sweep)
    for secret in ("sk-test-123456", "t0k3n-secret", "hf_written_in_the_file"):
        assert secret not in text
    data = YAML(typ="safe").load(text)
    assert data["env"]["AUTH_HEADER"] == "Bearer ${TOKEN}"
    assert data["env"]["HF_TOKEN"] == REDACTED
    assert data["env"]["PORT"] == "8080"
    assert data["models"][0]["env"] == {"OPENAI_API_KEY": "${OPENAI_KEY_FOR_TESTS}"}


# --- the policies' keys (docs/policies.md) ---------------------------------------------------

POLICY_SWEEP = MINIMAL.replace(
    "models: [mock/oracle]\n",
    "models: [mock/oracle, {id: local/llama, breaker: {threshold: 2}}, {id: x/y, breaker: off}]\n",
) + ("halt: now,error=10%\nbreaker: {threshold: 3, categories: [api_or_credit], cooldown: 10m}\n")


def test_halt_and_breaker_load_and_round_trip_through_the_snapshot(tmp_path: Path) -> None:
    from batch.policies.halt import HaltConfig, parse_halt
    from batch.sweep.features.policies import resolve_breaker

    sweep = load_text(tmp_path, POLICY_SWEEP)
    assert sweep.halt == parse_halt("now,error=10%")
    assert sweep.halt != HaltConfig()
    oracle, llama, xy = sweep.models
    assert resolve_breaker(sweep.breaker, oracle.breaker).threshold == 3
    assert resolve_breaker(sweep.breaker, llama.breaker).threshold == 2
    assert resolve_breaker(sweep.breaker, llama.breaker).cooldown == 600.0
    assert resolve_breaker(sweep.breaker, xy.breaker).enabled is False
    snapshot = write(tmp_path, sweep_snapshot(sweep), "snapshot.yaml")
    assert attrs.evolve(load_sweep(snapshot), path=sweep.path) == sweep


def test_a_sweep_without_policy_keys_snapshots_none(tmp_path: Path) -> None:
    data = YAML(typ="safe").load(sweep_snapshot(load_text(tmp_path, MINIMAL)))
    assert "halt" not in data
    assert "breaker" not in data
    assert all("breaker" not in model for model in data["models"])


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("halt: sometimes\n", "4:7", "cannot read halt 'sometimes'"),
        ("breaker: {threshold: 0}\n", "4:22", "breaker.threshold"),
    ],
)
def test_a_bad_policy_key_is_one_located_line(
    tmp_path: Path, text: str, where: str, fragment: str
) -> None:
    message = error_of(tmp_path, MINIMAL + text)
    assert message.startswith(f"{tmp_path / 'sweep.yaml'}:{where}: ")
    assert fragment in message
