"""Developer tooling of the repository, run from its root; not part of the shipped package.

    bundle_schema   bundles a schema of schema/ into one self-contained document
    gen_view        the view of schema/ the classes are generated from
    parity          the parity proof: `python -m tools.parity` (make parity)

scripts/gen.py (make gen) and the parity proof both import bundle_schema and gen_view from here.
"""
