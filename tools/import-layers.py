#!/usr/bin/env python3
"""Measure and check how nova_cyborg's modules import each other.

    tools/import-layers.py [--check] [ROOT]

Prints the modules per folder, the import circles, the longest import chain
and, with --check, exits 1 when a module imports one of a layer above it
or two modules import each other in a circle (tests/unit/test_layers.py
runs the check). Every import counts, at module level or in a function.

The layers, top to bottom (a module may import its own layer's and those
below): hooks, the scheduler weigher and cmd (the doors from Nova and the
operator); flows; steps and virt; clients; model; the foundation (conf,
i18n, exception, compat, policies). Within flows, no flow imports another
flow.
"""

import ast
import collections
import os
import sys

PACKAGE = 'nova_cyborg'
#: Layer of each top-level name under the package; higher imports lower.
LAYERS = {
    'hooks': 5, 'weigher': 5, 'cmd': 5,
    'flows': 4,
    'steps': 3, 'virt': 3,
    'clients': 2,
    'model': 1,
    'conf': 0, 'i18n': 0, 'exception': 0, 'compat': 0, 'policies': 0,
}


def modules(root):
    found = {}
    base = os.path.join(root, PACKAGE)
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)[:-3].replace(os.sep, '.')
            if rel.endswith('.__init__'):
                rel = rel[:-len('.__init__')]
            found[rel] = path
    return found


def imports(found):
    edges = collections.defaultdict(set)
    for mod, path in found.items():
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == PACKAGE or
                    node.module.startswith(PACKAGE + '.')):
                for alias in node.names:
                    full = '%s.%s' % (node.module, alias.name)
                    targets.append(full if full in found else node.module)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names
                           if a.name.startswith(PACKAGE + '.')]
            for target in targets:
                while target not in found and '.' in target:
                    target = target.rsplit('.', 1)[0]
                if target != mod and target != PACKAGE:
                    edges[mod].add(target)
    return edges


def top(mod):
    parts = mod.split('.')
    return parts[1] if len(parts) > 1 else ''


def flow(mod):
    parts = mod.split('.')
    return parts[2] if len(parts) > 2 and parts[1] == 'flows' else None


def circles(found, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(found):
        if v not in index:
            visit(v)
    return out


def longest_chain(found, edges):
    memo = {}

    def depth(v, seen):
        if v in memo:
            return memo[v]
        best = [v]
        for w in edges.get(v, ()):
            if w in seen:
                continue
            chain = depth(w, seen | {w})
            if len(chain) + 1 > len(best):
                best = [v] + chain
        memo[v] = best
        return best

    return max((depth(v, {v}) for v in sorted(found)), key=len)


def violations(edges):
    bad = []
    for mod, targets in sorted(edges.items()):
        for target in sorted(targets):
            a, b = LAYERS.get(top(mod)), LAYERS.get(top(target))
            if a is None or b is None:
                bad.append('%s -> %s: not in a layer' % (mod, target))
            elif b > a:
                bad.append('%s -> %s: imports a layer above' % (mod, target))
            elif flow(mod) and flow(target) and flow(mod) != flow(target):
                bad.append('%s -> %s: a flow imports another flow' %
                           (mod, target))
    return bad


def main(argv):
    check = '--check' in argv
    args = [a for a in argv if a != '--check']
    root = args[0] if args else os.getcwd()
    found = modules(root)
    edges = imports(found)
    folders = collections.Counter(m.rsplit('.', 1)[0] if m.count('.') > 1
                                  else PACKAGE for m in found)
    print('modules: %d, imports between them: %d' % (
        len(found), sum(len(t) for t in edges.values())))
    for folder, count in sorted(folders.items()):
        print('  %-40s %d' % (folder, count))
    loops = circles(found, edges)
    print('circles: %d' % len(loops))
    for loop in loops:
        print('  ' + ' <-> '.join(loop))
    chain = longest_chain(found, edges)
    print('longest import chain: %d modules: %s' % (
        len(chain), ' -> '.join(chain)))
    if not check:
        return 0
    bad = violations(edges) + ['circle: %s' % ' <-> '.join(loop)
                               for loop in loops]
    for line in bad:
        print('VIOLATION ' + line)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
