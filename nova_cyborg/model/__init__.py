"""Model: what nova-cyborg knows and records, without calling a service.

* ``bookkeeping``: the one owner of what a server's system metadata
  records about its ARQs (parked, retired, attached, created while the
  scheduler ran, the owners its ARQs are bound under) and whether a
  server has accelerators; every flow asks it.
* ``actions``: the accelerator actions' names, task states and records.
* ``request_groups``: device profile groups -> Placement request groups.
* ``capability``: the capability traits a patched compute reports and a
  server's operations need.
* ``fpga_function``: what a profile group asks of an FPGA.
* ``attach_handle`` and ``objects``: attach handles, strictly validated.
* ``handoff``: ARQs one step read, handed to the next in this process.
* ``aliases``: the servers whose ARQs are under their alias.

The model imports only the foundation (``conf``, ``exception``, ``i18n``,
``compat``) and itself. ``capability`` reads the traits of compute node
providers and ``aliases`` the cells' databases, through Nova.
"""
