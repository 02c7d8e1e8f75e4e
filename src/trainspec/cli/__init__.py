"""Command-line front ends: validate-config and the argument handling the trainers share."""
