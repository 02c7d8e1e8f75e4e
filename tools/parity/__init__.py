"""The parity proof: schema/, the generated classes and the handwritten rules agree.

Run it from the repository root as `python -m tools.parity` (see __main__.py for the checks and
options); subject.py loads what is checked, checks.py, documents.py and differential.py check it.
"""
