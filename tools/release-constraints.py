#!/usr/bin/env python3
"""Write the dependency set for an older OpenStack release.

Usage: release-constraints.py UPPER_CONSTRAINTS OVERRIDE... > constraints-X.txt

UPPER_CONSTRAINTS is openstack/requirements' upper-constraints.txt of the
release's stable branch (for 2026.1: ``git show
stable/2026.1:upper-constraints.txt``). Each package of this project's
constraints.txt takes that release's pin where the release has one, else
keeps constraints.txt's; each OVERRIDE (``name==version``) pins a service
the release ships that upper-constraints does not list (Nova, Placement,
Cyborg, Glance, Keystone).
"""

import re
import sys
import pathlib

_NAME = re.compile(r'^([A-Za-z0-9_.\-]+)\s*={2,3}\s*([^;\s]+)\s*(;.*)?$')


def _key(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.strip()
        match = _NAME.match(line)
        if match:
            pins.setdefault(_key(match.group(1)), []).append(
                (match.group(1), match.group(2), match.group(3) or ''))
    return pins


def main(argv):
    upper = _pins(pathlib.Path(argv[1]).read_text().splitlines())
    overrides = _pins(argv[2:])
    root = pathlib.Path(__file__).resolve().parent.parent
    ours = _pins((root / 'constraints.txt').read_text().splitlines())
    for key in sorted(ours, key=lambda k: ours[k][0][0].lower()):
        for name, version, marker in (overrides.get(key) or upper.get(key)
                                      or ours[key]):
            print('%s==%s%s' % (ours[key][0][0], version, marker))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
