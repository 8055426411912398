"""Clients: the services nova-cyborg calls.

* ``cyborg``: Cyborg's v2 API (device profiles, ARQs), over
  ``cyborg_http`` (its session, retries and errors) and ``cyborg_auth``
  (who calls Cyborg for a server of another project).
* ``allocations``: Placement allocations of an attached profile.
* ``compute_rpc``: the RPC that hands an accelerator action to the
  server's compute.

A client uses the model and the foundation, nothing above.
"""
