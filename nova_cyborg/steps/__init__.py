"""Steps: units of work several flows take, below the flows.

* ``arqs``: bind and wait for the binding (by event or, for a starting
  compute, by polling), park and unpark a server's ARQs, retire those it
  no longer uses, read the ARQs of its guest.
* ``bound_arqs``: nova-compute's wait for the bind events and the read of
  the Bound ARQs; why a build failed.
* ``function_check``: the card holds the FPGA function the profile asks.
* ``evacuation``: what an evacuated server takes along (the accelerators
  attached with addAccelerator) and drops on its new host.
* ``arq_allocations``: what Bound ARQs account for in an allocation.
* ``quota``: unified limits for the devices a server gets after boot.

A step uses the model and the clients, never a flow.
"""
