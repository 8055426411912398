"""Stand-ins for vendors' command-line tools, acting on a simulated host."""
