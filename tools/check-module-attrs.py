#!/usr/bin/env python3
"""Check that every ``alias.name`` used in a file names something the
imported nova_cyborg module defines (a moved function leaves no alias
behind). Usage: check-module-attrs.py FILE..."""
import ast
import importlib
import os
import sys


def check(path):
    tree = ast.parse(open(path).read())
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith('nova_cyborg'):
            for a in node.names:
                full = node.module + '.' + a.name
                try:
                    importlib.import_module(full)
                except ImportError:
                    continue
                aliases[a.asname or a.name] = full
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith('nova_cyborg') and a.asname:
                    aliases[a.asname] = a.name
    bad = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and
                isinstance(node.value, ast.Name) and
                node.value.id in aliases):
            mod = importlib.import_module(aliases[node.value.id])
            if not hasattr(mod, node.attr) and not isinstance(
                    node.ctx, ast.Store):
                bad.append('%s:%d: %s.%s (%s)' % (
                    path, node.lineno, node.value.id, node.attr,
                    aliases[node.value.id]))
    return bad


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    out = []
    for p in sys.argv[1:]:
        out += check(p)
    print('\n'.join(out))
    sys.exit(1 if out else 0)
