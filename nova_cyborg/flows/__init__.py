"""Flows: each server operation that involves accelerators, owning its
steps in order.

One folder or module per flow; a flow uses steps, the model and the
clients, never another flow (tools/import-layers.py --check, run by
tests/unit/test_layers.py):

* ``boot``: a first build's ARQs, created while the scheduler runs and
  bound while the conductor records the server (``early_arqs``), and the
  conductor's create and bind for a build, rebuild, evacuation or
  unshelve (``conductor``).
* ``move``: resize and cold migration (``resize``), their revert
  (``revert``), and a nova-compute restarted in the middle of one
  (``recovery``, ``revert_recovery``).
* ``live_migration``: the conductor's destination ARQs (``conductor``),
  the source's and destination's computes (``compute``), a source
  restarted in the middle of one (``reset``).
* ``attach``: ``addAccelerator`` and ``removeAccelerator``: nova-api's
  side (``api``), nova-compute's RPC endpoint (``endpoint``) and work
  (``compute``), an action a compute stopped in (``recovery``) or that
  nothing ended (``stuck_actions``).
* ``cleanup``: the ARQs of deleted servers (``delete``, ``sweep``).
* ``heal``: ``nova-manage placement heal_allocations``.
* ``server_actions``: which server actions nova-api lets a server with
  accelerators take.
* ``scheduling``: the scheduler's claim of more than a host's first
  candidate.
"""
