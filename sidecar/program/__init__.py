"""Programming FPGAs and creating mediated devices: jobs, programmers,
leases (Placement allocations), the job journal and the bitstreams."""
