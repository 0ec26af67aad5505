"""worker-host: run untrusted agent plugins inside WebAssembly isolates."""
