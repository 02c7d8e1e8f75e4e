"""Helpers that tests in more than one directory use, imported as `helpers.<module>` (tests/ is
on the path: its conftest.py is the root one). A helper of one directory's tests lives beside
them (tests/cli/cli_support.py, tests/trainers/slurm/cluster.py, ...)."""
