"""Project configuration: sources and their precedence, and precise errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.config import (
    DEFAULT_TOLERANCES,
    ProjectConfig,
    find_config_file,
    load_config,
)
from kernelpilot.errors import ConfigError
from kernelpilot.starter import commented_template


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()  # marks the git root: the search stops here
    return tmp_path


def test_defaults_without_any_file(project: Path) -> None:
    cfg = load_config(project, env={})
    assert cfg.root == project.resolve()
    assert cfg.problem is None and cfg.candidate_dir is None and cfg.config_file is None
    assert cfg.trials == 5 and cfg.compile_mode == "default" and cfg.model is None
    assert cfg.tolerances == DEFAULT_TOLERANCES
    assert cfg.budgets == {"max_turns": 40, "max_tokens": 2_000_000, "max_cost_usd": 5.0, "max_wall_s": 3600.0}


def test_kernelpilot_toml_is_found_upward_and_paths_are_relative_to_it(project: Path) -> None:
    write(project / "kernelpilot.toml", 'problem = "ops/softmax.py"\ntrials = 9\nmodel = "openai/gpt-5"\n')
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    cfg = load_config(deep, env={})
    assert cfg.config_file == project / "kernelpilot.toml"
    assert cfg.root == project
    assert cfg.problem == project / "ops" / "softmax.py"
    assert cfg.candidate_dir == project / "kernels" / "softmax"
    assert cfg.trials == 9 and cfg.model == "openai/gpt-5"


def test_pyproject_tool_table(project: Path) -> None:
    write(project / "pyproject.toml",
          '[project]\nname = "x"\n\n[tool.kernelpilot]\nproblem = "p.py"\ncandidate_dir = "cand"\n')
    cfg = load_config(project, env={})
    assert cfg.problem == project / "p.py" and cfg.candidate_dir == project / "cand"


def test_pyproject_without_table_is_skipped_and_kernelpilot_toml_wins(project: Path) -> None:
    write(project / "kernelpilot.toml", "trials = 3\n")
    write(project / "sub" / "pyproject.toml", '[project]\nname = "sub"\n')
    assert load_config(project / "sub", env={}).trials == 3
    write(project / "pyproject.toml", "[tool.kernelpilot]\ntrials = 4\n")
    assert load_config(project, env={}).trials == 3  # same directory: kernelpilot.toml wins


def test_search_stops_at_git_root(tmp_path: Path) -> None:
    write(tmp_path / "kernelpilot.toml", "trials = 7\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert find_config_file(repo) is None
    assert load_config(repo, env={}).trials == 5


def test_precedence_defaults_file_env_overrides(project: Path) -> None:
    write(project / "kernelpilot.toml",
          'trials = 7\nmodel = "anthropic/a"\ncompile_mode = "max-autotune"\nmax_turns = 10\n')
    env = {"KERNELPILOT_TRIALS": "8", "KERNELPILOT_MODEL": "openai/b", "KERNELPILOT_ARCH": "sm_90",
           "KERNELPILOT_DATA_DIR": "/x"}
    cfg = load_config(project, overrides={"trials": 9, "model": None}, env=env)
    assert cfg.trials == 9  # override beats env beats file
    assert cfg.model == "openai/b"  # None override leaves the env value
    assert cfg.compile_mode == "max-autotune"  # file beats default
    assert cfg.max_turns == 10
    assert cfg.max_tokens == 2_000_000  # default


def test_env_lists_and_bools(project: Path) -> None:
    cfg = load_config(project,
                      env={"KERNELPILOT_ALLOWED_LIBRARIES": "cublas, cudnn", "KERNELPILOT_CUDA_GRAPHS": "true"})
    assert cfg.allowed_libraries == ["cublas", "cudnn"] and cfg.cuda_graphs is True


def test_tables_merge_over_defaults_with_dtype_aliases(project: Path) -> None:
    write(project / "kernelpilot.toml",
          "[tolerances]\nbf16 = [0.03, 0.02]\n\n[max_normalized_error]\nfp32 = 2e-5\n\n[keys]\napprove = \"y\"\n")
    cfg = load_config(project, env={})
    assert cfg.tolerances["bfloat16"] == (0.03, 0.02)
    assert cfg.tolerances["float32"] == DEFAULT_TOLERANCES["float32"]
    assert cfg.max_normalized_error["float32"] == 2e-5
    assert cfg.tolerance("torch.bfloat16") == (0.03, 0.02)
    assert cfg.keys == {"approve": "y"}


def test_extra_shapes_both_forms(project: Path) -> None:
    write(project / "kernelpilot.toml",
          '[[extra_shapes]]\nname = "odd"\ninputs = [[3, 5000]]\n\n[[extra_shapes]]\nname = "expr"\ninputs = '
          '"[torch.rand(2, 7)]"\n')
    cfg = load_config(project, env={})
    assert cfg.extra_shapes == [{"name": "odd", "inputs": [[3, 5000]]},
                                {"name": "expr", "inputs": "[torch.rand(2, 7)]"}]


def test_problem_py_layout_defaults_candidate_dir(project: Path) -> None:
    cfg = load_config(project, overrides={"problem": str(project / "examples" / "softmax" / "problem.py")}, env={})
    assert cfg.candidate_dir == project / "examples" / "softmax" / "candidate"


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('trials = "five"', "trials in {file} must be a positive integer, got str 'five'"),
        ("trials = 0", "trials in {file} must be a positive integer"),
        ("trials = true", "trials in {file} must be a positive integer, got bool True"),
        ('compile_mode = "fast"', 'compile_mode in {file} must be "default" or "max-autotune"'),
        ("max_cost_usd = -1", "max_cost_usd in {file} must be a number >= 0"),
        ("cuda_graphs = 1", "cuda_graphs in {file} must be true or false"),
        ('allowed_libraries = "cublas"', "allowed_libraries in {file} must be a list of non-empty strings"),
        ("problem = 3", "problem in {file} must be a non-empty path string"),
        ("[tolerances]\nbfloat16 = 0.01", "tolerances.bfloat16 in {file} must be a pair [atol, rtol]"),
        ("[tolerances]\nint7 = [1, 1]", "tolerances.int7 in {file} names unknown dtype 'int7'"),
        ("[max_normalized_error]\nfloat32 = 0", "max_normalized_error.float32 in {file} must be a positive number"),
        ('[[extra_shapes]]\nname = "a"\ninputs = [[1, -2]]',
         "extra_shapes[0].inputs in {file} must be a list of shapes"),
        ('[[extra_shapes]]\nname = "a"\ninputs = "[torch.rand(2"',
         "extra_shapes[0].inputs in {file} is not a valid Python expression"),
        ('[[extra_shapes]]\ninputs = [[1]]',
         "extra_shapes[0] in {file} must be a table with exactly the keys name and inputs"),
        ("trails = 3", "unknown key 'trails' in {file} (did you mean 'trials'?)"),
    ],
)
def test_bad_values_name_key_and_file(project: Path, toml: str, needle: str) -> None:
    path = write(project / "kernelpilot.toml", toml + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(project, env={})
    assert needle.format(file=path) in str(err.value)


def test_bad_value_in_pyproject_names_the_table(project: Path) -> None:
    path = write(project / "pyproject.toml", "[tool.kernelpilot]\ntrials = 1.5\n")
    with pytest.raises(ConfigError, match=rf"trials in \[tool.kernelpilot\] of {path} must be a positive integer"):
        load_config(project, env={})


def test_invalid_toml_names_the_file(project: Path) -> None:
    path = write(project / "kernelpilot.toml", "trials = = 3\n")
    with pytest.raises(ConfigError, match=rf"{path} is not valid TOML \(.*line 1"):
        load_config(project, env={})


def test_bad_env_value_names_the_variable(project: Path) -> None:
    with pytest.raises(ConfigError, match="environment variable KERNELPILOT_TRIALS must be an integer, got 'many'"):
        load_config(project, env={"KERNELPILOT_TRIALS": "many"})
    with pytest.raises(ConfigError,
                       match="max_turns in environment variable KERNELPILOT_MAX_TURNS must be a positive integer, got "
                             "int -4"):
        load_config(project, env={"KERNELPILOT_MAX_TURNS": "-4"})


def test_bad_override_names_the_command_line(project: Path) -> None:
    with pytest.raises(ConfigError, match="compile_mode in the command line must be"):
        load_config(project, overrides={"compile_mode": "turbo"}, env={})


def test_commented_template_parses_and_names_every_key(project: Path) -> None:
    text = commented_template("softmax.py", "kernels/softmax")
    write(project / "kernelpilot.toml", text)
    cfg = load_config(project, env={})
    assert cfg.problem == project / "softmax.py"
    uncommented = "\n".join(line.lstrip("# ") for line in text.splitlines())
    for key in ProjectConfig.__dataclass_fields__:
        if key not in ("root", "config_file"):
            assert key in uncommented, key
