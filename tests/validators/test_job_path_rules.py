"""What a config places in a path or a job script (validators/run_paths.py, validators/slurm.py)
as validate-config reports it: the file, line and column of the value, what is wrong with it
and the fix. run.dir stays one directory under output_dir; with [slurm], what the job script
holds unquoted (#SBATCH lines, comments, exported names) cannot break out of its line. The
rule table (rule_cases.toml) states each rule's boundaries."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from trainspec.cli.validate_config import run

MULTI_NODE = (
    '[deployment]\ntype = "multi_node"\nnum_train_nodes = 1\nnum_infer_nodes = 1\n\n[inference]\n'
)


def validate_config(path: Path, kind: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(path), "--kind", kind], out, err)
    return code, out.getvalue() + err.getvalue()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("kind", ["sft", "rl_run"])
@pytest.mark.parametrize(
    ("written", "said", "fix"),
    [
        (
            '"/etc/cron.d"',
            '= "/etc/cron.d" holds "/": it is a path, and the run (and what clean = true '
            "deletes) would go outside output_dir",
            'set run.dir = "cron.d" and output_dir = "/etc", the directory above it',
        ),
        (
            '"../../x"',
            '= "../../x" holds "/": it is a path, and the run (and what clean = true deletes) '
            "would go outside output_dir",
            'set run.dir = "x" and output_dir = "..", the directory above it',
        ),
        (
            '".."',
            '= ".." is the directory above output_dir, not a directory of its own under output_dir',
            'give run.dir one directory name of its own, such as "my-run"',
        ),
        (
            '"a\\ntouch pwned"',
            '= "a\\ntouch pwned" holds a newline, which a directory name (and the job script '
            "that names it) cannot",
            'give run.dir one directory name of its own, such as "my-run"',
        ),
    ],
    ids=["absolute", "up", "dot-dot", "newline"],
)
def test_run_dir_is_one_name_under_output_dir(kind, written, said, fix, tmp_path):
    path = write(tmp_path, f'max_steps = 3\noutput_dir = "outputs"\n\n[run]\ndir = {written}\n')
    code, report = validate_config(path, kind)
    assert code == 1
    assert f"{path}:5:7: error: run.dir {said}\n    fix: {fix}\n" in report, report
    assert f"invalid {kind} config (1 error, 0 warnings)" in report


def test_run_dir_is_one_name_reports_run_name_when_run_dir_defaults_to_it(tmp_path):
    path = write(tmp_path, '[run]\nname = "team/exp-1"\n')
    code, report = validate_config(path, "rl_run")
    assert code == 1
    assert report.startswith(
        f'{path}:2:8: error: run.name = "team/exp-1" holds "/": it is a path, and the run (and '
        "what clean = true deletes) would go outside output_dir (run.dir defaults to run.name)\n"
        '    fix: set run.name = "exp-1" and output_dir = "outputs/team", the directory above it\n'
    ), report


def test_exported_env_names_are_shell_names_refuses_one_at_its_key(tmp_path):
    path = write(
        tmp_path,
        f'max_steps = 3\n\n[env_vars]\n"A; touch pwned; B" = "1"\nOK_1 = "2"\n\n{MULTI_NODE}'
        '\n[slurm]\npartition = "gpu"\n',
    )
    code, report = validate_config(path, "rl_run")
    assert code == 1
    assert report.startswith(
        f'{path}:4:1: error: env_vars."A; touch pwned; B" cannot be exported by the job script '
        '("A; touch pwned; B"): with [slurm] and a multi_node deployment the script runs '
        "`export NAME=value` for each [env_vars] entry, and a shell variable is named by "
        'letters, digits and "_", not starting with a digit\n'
        '    fix: rename "A; touch pwned; B" in [env_vars] (as MY_VAR)\n'
    ), report
    assert "(1 error, 0 warnings)" in report


def test_sbatch_values_are_words_with_the_job_log_path_at_their_lines(tmp_path):
    path = write(
        tmp_path,
        'max_steps = 3\noutput_dir = "my runs"\n\n[slurm]\n'
        'partition = "debug\\n#SBATCH --wrap=x"\ntime = "1:00:00"\n',
    )
    code, report = validate_config(path, "sft")
    assert code == 1
    assert report.startswith(
        f'{path}:2:14: error: output_dir = "my runs" holds a space: with [slurm] it is part of '
        "the job log's path on the `#SBATCH --output=` line of the job script, which cannot be "
        "quoted\n"
        "    fix: give output_dir a value without spaces, quotes or control characters\n"
        "    see: docs/reference/sft.md#output_dir\n"
        f'{path}:5:13: error: slurm.partition = "debug\\n#SBATCH --wrap=x" holds a newline: it '
        "becomes the one word of `#SBATCH --partition=`, a line of the job script that cannot "
        "be quoted\n"
        "    fix: give slurm.partition as one word, without spaces, quotes or control characters\n"
        "    see: docs/reference/sft.md#slurm.partition\n"
    ), report


def test_a_quote_in_the_job_log_path_is_refused_at_its_line(tmp_path):
    """sbatch reads quotes on its `#SBATCH` lines: a run name with one left open failed the
    submission (`Unmatched` from sbatch, after the run directory was made)."""
    path = write(tmp_path, 'max_steps = 3\n\n[run]\nname = "it\'s"\n\n[slurm]\n')
    code, report = validate_config(path, "sft")
    assert code == 1
    assert report.startswith(
        f"{path}:4:8: error: run.name = \"it's\" holds the quote ': with [slurm] it is part of "
    ), report


@pytest.mark.parametrize("kind", ["sft", "rl_run"])
def test_what_a_job_script_does_not_hold_may_hold_anything_a_process_can(kind, tmp_path):
    """Without [slurm] (or on one node, where rl sets [env_vars] itself) spaces in paths and
    names that are no shell names are fine."""
    path = write(
        tmp_path,
        'max_steps = 3\noutput_dir = "my runs"\n\n[run]\nname = "my run"\n\n'
        '[env_vars]\n"MY VAR" = "1"\n"lower.case" = "2"\n',
    )
    code, report = validate_config(path, kind)
    assert code == 0, report
    path.write_text(path.read_text().replace('"my runs"', '"runs"').replace('"my run"', '"r"')
                    + '\n[slurm]\npartition = "gpu"\n')  # fmt: skip
    code, report = validate_config(path, kind)
    assert code == 0, report
