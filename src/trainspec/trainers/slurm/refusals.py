"""What a job under [slurm] refuses before anything is submitted: a filesystem the nodes do not
share, a value that is not one `#SBATCH` word, a template that is not there.

    refusals = slurm_refusals(config.slurm)    # list[SetupError]; a dry run lists them
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SetupError

# [slurm] values that become `#SBATCH --option=value` lines, which take one word each.
SBATCH_WORDS = ("job_name", "partition", "nodelist", "exclude", "account", "time")


def slurm_refusals(slurm) -> list[SetupError]:
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
        if value is not None and (not value or any(c.isspace() for c in value)):
            refusals.append(
                SetupError(
                    f"slurm.{key}",
                    f"= {value!r}: it becomes one `#SBATCH --{key.replace('_', '-')}=` word",
                    "give it without spaces",
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
