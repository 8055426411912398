"""A server's first build: its ARQs created and bound in the conductor."""
