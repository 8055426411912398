# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""What differs between the Nova releases nova-cyborg runs on.

nova-cyborg supports Nova 34.0.x (2026.2) and Nova 33.0.x (2026.1, with
Cyborg 16.0.x). Each difference the project's code meets is decided here,
by looking at what the installed Nova has (a module, a function, a
method), never by its version string, so that a stable update or a
backport is judged by what it contains:

* :func:`spawn`: Nova 34 runs background work in its named thread pools
  (``nova.thread_pool_factory``); Nova 33 has one default pool behind
  ``nova.utils.spawn``.
* :func:`warn_if_nova_managed`: Nova 34 warns when a GPU Cyborg manages
  is also in Nova's own ``[mdev_*]`` configuration; Nova 33 has no such
  check (nothing is logged).
* :func:`owner_nova_prefilter`: Nova 34's scheduler requires the
  ``OWNER_NOVA`` trait on the compute node and on PCI-in-Placement
  groups, so Nova's own PCI requests never land on providers another
  service (the sidecar) reports. Nova 33 has no such prefilter:
  :func:`warn_without_owner_prefilter` says so once when PCI in Placement
  is on (install guide, "Supported releases").
* :func:`enforce_limits`: Nova 34 counts a device profile's groups in its
  unified limits (``enforce_num_instances_and_resources``); Nova 33 counts
  the flavor alone (``enforce_num_instances_and_flavor``): the groups'
  resource classes are added to its deltas.

Nothing else in the project asks which Nova it runs on.
"""

import functools
import importlib

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def _module(name):
    """The module ``name`` of the installed Nova, or None if it has none."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@functools.lru_cache(maxsize=None)
def _thread_pool_factory():
    return _module('nova.thread_pool_factory')


def spawn(func, *args):
    """Run ``func(*args)`` in Nova's default thread pool.

    Native threads, or green threads when Nova runs with eventlet; the
    request context of the caller's thread is carried over, as Nova does.

    :returns: a futurist Future.
    :raises: RuntimeError when the pool is shutting down.
    """
    factory = _thread_pool_factory()
    if factory is not None:
        return factory.spawn_on(factory.ExecutorType.DEFAULT, func, *args)
    from nova import utils
    return utils.spawn(func, *args)


def spawn_long_task(manager, task_name, instance, context, func, *args):
    """Run ``func(*args)`` on nova-compute's long-task pool, where Nova
    runs builds and snapshots, and return: the RPC thread that received
    the cast is free again at once.

    Nova 34 records the task (``_start_recorded_task``) so that a graceful
    shutdown waits for it; Nova 33 has the manager's own long-task
    executor (``utils.spawn_on``).

    :returns: a futurist Future.
    """
    factory = _thread_pool_factory()
    if factory is not None:
        return manager._start_recorded_task(
            factory.ExecutorType.LONG_TASK, task_name, instance, context,
            func, *args)
    from nova import utils
    return utils.spawn_on(manager._long_task_executor, func, *args)


def warn_if_nova_managed(driver, attach_handle_info):
    """Nova's warning for a GPU both Cyborg and Nova's ``[mdev_*]``
    configuration manage, where the driver has it (Nova 34)."""
    warn = getattr(driver, '_warn_if_nova_managed', None)
    if callable(warn):
        warn(attach_handle_info)


def owner_nova_prefilter():
    """Whether Nova's scheduler keeps its own PCI requests off providers
    other services report (the ``owner_nova_filter`` prefilter; Nova 34)."""
    request_filter = _module('nova.scheduler.request_filter')
    return callable(getattr(request_filter, 'owner_nova_filter', None))


_warned = []


def warn_without_owner_prefilter(conf):
    """Log once, as a warning, that Nova's PCI requests are not kept off
    the sidecar's providers: Nova without the ``OWNER_NOVA`` prefilter and
    ``[filter_scheduler] pci_in_placement`` on.

    :param conf: Nova's configuration.
    :returns: True if it warned (now or before).
    """
    if _warned:
        return True
    if owner_nova_prefilter():
        return False
    if not conf.filter_scheduler.pci_in_placement:
        return False
    _warned.append(True)
    LOG.warning(
        'This Nova has no OWNER_NOVA scheduling prefilter (Nova 34 has '
        'it) and [filter_scheduler] pci_in_placement is on: a PCI alias '
        'whose resource class is also one a device the nova-cyborg '
        'sidecar reports could be placed on that device. Keep the '
        'devices the sidecar manages out of Nova\'s [pci] device_spec and '
        'give Nova\'s PCI devices resource classes of their own.')
    return True


def enforce_limits(context, project_id, flavor, is_bfv, groups,
                   delta_updates=None):
    """Nova's unified-limit check of one server with ``flavor`` and the
    device profile groups ``groups`` (nova_cyborg.steps.quota).

    :param delta_updates: deltas that replace the computed ones (e.g.
        ``{'servers': 0}``).
    :raises: nova.exception.TooManyInstances over a limit.
    """
    from nova.limit import placement as placement_limits
    from nova.scheduler import utils as scheduler_utils
    enforce = getattr(placement_limits,
                      'enforce_num_instances_and_resources', None)
    if enforce is not None:
        spec = scheduler_utils.request_spec_for_limits(
            flavor, is_bfv, dp_request_groups=groups)
        enforce(context, project_id, spec, 1, 1,
                delta_updates=delta_updates)
        return
    updates = dict(delta_updates or {})
    for group in groups:
        for rc, amount in group.resources.items():
            key = 'class:%s' % rc
            updates[key] = updates.get(key, 0) + amount
    placement_limits.enforce_num_instances_and_flavor(
        context, project_id, flavor, is_bfv, 1, 1, delta_updates=updates)
