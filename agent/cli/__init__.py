"""Command-line tools of the host agent: ``mrc-agent`` (serve, send, status) and ``mrc-perf``."""
