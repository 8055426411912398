"""Live migration of a server with accelerators: conductor, computes, and
a source restarted in the middle of one."""
