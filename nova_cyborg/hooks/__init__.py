"""The hook layer: the only part of nova_cyborg that patched Nova imports.

Each patched Nova file imports one module of this package once, at module
level (``from nova_cyborg.hooks import compute as cyborg_hooks``), so that
a broken install fails when the service starts, not in the middle of an
operation. Each module serves one Nova service or layer; each function is
an entry point documented with the Nova method that calls it, the Nova
objects it takes and what it returns or raises. The functions route to
the project's flows (nova_cyborg.flows), which take steps
(nova_cyborg.steps) and use the model (nova_cyborg.model) and the clients
(nova_cyborg.clients); nothing below this package imports it.

Modules, by the Nova module that imports them:

* ``accelerator``: nova.accelerator.cyborg
* ``api``: nova.compute.api
* ``api_actions``: nova.api.openstack.compute.routes
* ``policies``: nova.policies
* ``conductor``: nova.conductor.manager, nova.conductor.tasks.migrate
* ``scheduler``: nova.scheduler.manager, nova.scheduler.request_filter
* ``compute``: nova.compute.manager
* ``compute_utils``: nova.compute.utils
* ``resource_tracker``: nova.compute.resource_tracker
* ``libvirt``: nova.virt.libvirt.driver
* ``manage``: nova.cmd.manage
"""
