"""What a job under [slurm] refuses before anything is submitted (or written, on a dry run): a
filesystem the nodes do not share, a value that is not one `#SBATCH` word, a run directory
whose path is not one (the job log's `#SBATCH --output=` line), a template that is not there.

    refusals = slurm_refusals(config.slurm, run_dir)    # list[SetupError] (run_dir: its path too)

The config's own values are refused earlier, by validation (validators/slurm.py), at their
line; what only the command knows is checked here: the run directory made absolute from where
it runs.
"""

from __future__ import annotations

from pathlib import Path

from trainspec.validators.slurm import SBATCH_WORDS, sbatch_option, unquotable

from ..errors import SetupError


def slurm_refusals(slurm, run_dir: Path | None = None) -> list[SetupError]:
    refusals = []
    if not slurm.shared_fs:
        refusals.append(
            SetupError(
                "slurm.shared_fs",
                "= false: trainspec installs nothing on the nodes; the job runs the Python "
                "environment this command runs in, reads its configs from the run directory, "
                "and multi-node rl passes weights and batches through it",
                "put the project and output_dir on a filesystem every node mounts, and drop "
                "shared_fs",
            )
        )
    for key in SBATCH_WORDS:
        value = getattr(slurm, key)
        if value is not None and (not value or unquotable(value)):
            refusals.append(
                SetupError(
                    f"slurm.{key}",
                    f"= {value!r}: it becomes the one word of `{sbatch_option(key)}`",
                    "give it as one word, without spaces, quotes or control characters",
                )
            )
    what = None if run_dir is None else unquotable(str(run_dir))
    if what is not None:
        refusals.append(
            SetupError(
                "output_dir",
                f"the run directory {str(run_dir)!r} holds {what}: the job log's path in it goes "
                "on the job script's `#SBATCH --output=` line, which cannot be quoted",
                "run from, or set slurm.project_dir and output_dir to, a directory whose path "
                "holds no spaces, quotes or control characters",
            )
        )
    if slurm.template_path is not None and not Path(slurm.template_path).is_file():
        refusals.append(
            SetupError(
                "slurm.template_path",
                f"= {slurm.template_path!r}: no such file (from {Path.cwd()})",
                "give the path of your Jinja template, or drop it to use the bundled one",
            )
        )
    return refusals
