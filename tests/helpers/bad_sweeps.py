"""Shared by tests: moved from tests/unit/sweep/test_sweep.py so any test can import it."""

from __future__ import annotations

from helpers.paths import TEST_DATA

BAD_SWEEPS = TEST_DATA / "bad_sweeps"

#: file -> (LINE:COL, message fragment). Every file in bad_sweeps/ must be listed here.
BROKEN = {
    "alias_bomb.yaml": ("6:18", "log_patterns.b[0]: expected a string, got a list"),
    "bad_duration.yaml": ("5:10", "timeout: unknown unit 'x' in '30x'"),
    "bad_order.yaml": ("5:8", "order: must be one of interleave, model-major, got 'random'"),
    "binary_tag.yaml": ("2:7", "unsupported YAML tag !!binary (allowed: !!str, !!int, "),
    "command_string.yaml": ("4:10", 'e.g. [python, agent.py, "{case}", --out, "{run_dir}"]'),
    "complex_key.yaml": ("5:9", "a mapping key must be a string or number, not a list"),
    "control_character.yaml": ("2:12", "not valid YAML: control character #x0007 (write it as"),
    "date_timeout.yaml": ("5:10", "timeout: cannot read '2026-01-01' as a duration"),
    "discovery_no_match.yaml": ("2:23", "cases.glob: nothing in"),
    "lone_surrogate_case.yaml": ("2:14", "not valid Unicode text (a lone surrogate"),
    "lone_surrogate_secret.yaml": ("5:20", "not valid Unicode text (a lone surrogate"),
    "duplicate_case.yaml": ("5:5", "duplicate case id 'c01' (first at line 3)"),
    "duplicate_model.yaml": ("5:5", "duplicate model id 'openai/gpt-4o' (first at line 4)"),
    "duplicate_yaml_key.yaml": ("6:1", 'not valid YAML: found duplicate key "timeout"'),
    "empty_case_id.yaml": ("4:5", "cases[1]: the case id is empty"),
    "empty_cases.yaml": ("2:8", "cases: is empty"),
    "empty_file.yaml": (
        "1:1",
        "must be a mapping of keys (cases, models, command, ...); it is empty",
    ),
    "empty_models.yaml": ("3:9", "models: is empty"),
    "executor_empty_scheduler.yaml": ("5:35", "executor.scheduler: empty address"),
    "executor_scheduler_with_local.yaml": (
        "5:36",
        "executor.scheduler: a scheduler needs kind: dask",
    ),
    "executor_unknown_key.yaml": (
        "7:3",
        "unknown key 'schedular' in executor (did you mean 'scheduler'?)",
    ),
    "executor_unknown_kind.yaml": (
        "5:11",
        "executor: must be one of local, dask, slurm, got 'dsk' (did you mean 'dask'?)",
    ),
    "executor_wrong_type.yaml": (
        "5:11",
        "executor: expected local, dask, slurm or {kind: KIND, ...}, got an integer",
    ),
    "key_line_break.yaml": ("5:1", "unknown key 'max\\nconcurrent' (did you mean 'max_concurrent'"),
    "local_tag.yaml": ("3:10", "unsupported YAML tag !model (allowed: "),
    "max_concurrent_zero.yaml": ("5:17", "max_concurrent: must be at least 1, got 0"),
    "merge_not_mapping.yaml": ("3:10", "expected a mapping or list of mappings for merging"),
    "missing_command.yaml": ("2:1", "missing required key 'command'"),
    "missing_param.yaml": ("6:53", "{params.difficulty} is not set for case 'c01'"),
    "negative_duration.yaml": ("5:13", "kill_grace: duration '-5s' is negative"),
    "negative_retries.yaml": ("5:10", "retries: must be at least 0, got -1"),
    "newline_model_id.yaml": ("3:10", "models[0]: the model id contains a NUL or line break"),
    "not_mapping.yaml": (
        "2:1",
        "must be a mapping of keys (cases, models, command, ...); it is a list",
    ),
    "not_utf8.yaml": ("2:12", "not UTF-8 text (byte 0xe9)"),
    "not_yaml.yaml": ("3:7", "not valid YAML: expected ',' or ']', but got ':'"),
    "nul_case_id.yaml": ("3:10", "cases[0].id: the case id contains a NUL or line break"),
    "null_case_timeout.yaml": ("3:24", "a case cannot lift the sweep's timeout"),
    "python_tag.yaml": ("2:8", "unsupported YAML tag !!python/object/apply:os.system (allowed"),
    "secret_alias.yaml": (
        "6:19",
        "order: must be one of interleave, model-major, got '[REDACTED]'",
    ),
    "secret_alias_long.yaml": (
        "7:19",
        "max_concurrent: expected an integer (at least 1), got a string (62 characters)",
    ),
    "secret_bad_reference.yaml": (
        "5:27",
        "models[0].env.OPENAI_API_KEY: a '${' in the value (not shown: secret) is not a variable",
    ),
    "secret_duplicate_key.yaml": ("7:3", 'not valid YAML: found duplicate key "HF_TOKEN" (while'),
    "secret_reused_anchor.yaml": ("8:10", "timeout: must be more than 0"),
    "secret_unterminated_reference.yaml": (
        "6:19",
        "env.OPENAI_API_KEY: unterminated '${' in the value (not shown: secret)",
    ),
    "set_tag.yaml": ("2:8", "unsupported YAML tag !!set (allowed: "),
    "tag_value_mismatch.yaml": ("5:17", "the value is not a valid !!int"),
    "tag_wrong_kind.yaml": ("4:10", "!!str cannot tag a list"),
    "timestamp_tag.yaml": ("5:10", "unsupported YAML tag !!timestamp (allowed: "),
    "too_deep_list.yaml": ("2:107", "nesting too deep (more than 100 levels"),
    "too_deep_params.yaml": ("4:410", "nesting too deep (more than 100 levels"),
    "unbalanced_brace.yaml": ("4:23", "command[2]: expected '}' before end of string"),
    "unknown_key.yaml": ("5:1", "unknown key 'max_concurent' (did you mean 'max_concurrent'?)"),
    "unknown_model_key.yaml": ("5:22", "unknown key 'max_concurent' in models[1] (did you mean"),
    "unknown_placeholder.yaml": ("4:29", "unknown placeholder {cse} (did you mean {case}?"),
    "unset_env_var.yaml": (
        "6:23",
        "models[0].env.OPENAI_API_KEY: environment variable BATCH_LEDGER_TEST_UNSET_VARIABLE "
        "is not set",
    ),
    "wrong_type.yaml": (
        "5:17",
        "max_concurrent: expected an integer (at least 1), got a string ('four')",
    ),
}
