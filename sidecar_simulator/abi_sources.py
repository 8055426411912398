"""What every simulated hardware profile shares: which source a written
path comes from, and what a written tree holds.

Each profile module (:mod:`sidecar_simulator.dfl`, ``xrt``, ``nvidia``,
``pci_health``) keeps its own ``SOURCES`` (kind of path -> its source in
the kernel tree or the vendor's) and ``_RULES`` (pattern of a path
relative to the sysfs root -> kind, first match); a unit test walks the
tree a profile wrote and fails on a path with no source.
"""

import os


def source_of(rules, relpath):
    """The kind of ``relpath`` by the first of ``rules`` it matches, or
    None."""
    for pattern, kind in rules:
        if pattern.search(relpath):
            return kind
    return None


def written_paths(root):
    """Every file, directory and link under ``root``, relative to it."""
    result = []
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            result.append(os.path.relpath(os.path.join(top, name), root))
    return sorted(result)
