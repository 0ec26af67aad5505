"""Host capabilities: workspace files, a sandboxed shell, bounded web fetch.

Host-side implementations with the contract's limits and safe codes. They know
nothing of plugins or isolates: worker_host exposes them to guests.
"""
