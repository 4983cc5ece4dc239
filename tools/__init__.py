"""Project tooling: locating optional external tools, probing the kernel, `make doctor`."""
