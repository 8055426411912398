"""Benchmarks of nova-cyborg, side by side with upstream (``tox -e bench``).

See benchmarks/README.rst: ``python -m benchmarks`` runs every figure and
writes ``benchmarks/results/latest.json`` and ``latest.md``.
"""
