"""Releasing the ARQs of deleted servers: at delete, and the operator's
sweep of those a delete could not reach."""
