"""``addAccelerator`` and ``removeAccelerator``: nova-api, the compute's
RPC endpoint and work, and an action interrupted or never ended."""
