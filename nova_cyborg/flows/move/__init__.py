"""Resize and cold migration of a server with accelerators, their revert,
and a compute restarted in the middle of either."""
