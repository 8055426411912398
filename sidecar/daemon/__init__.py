"""The daemon's wiring: the service loop, its construction from the
configuration, the cyborg-agent RPC server and the control socket."""
