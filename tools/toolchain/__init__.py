"""`make toolchain`: the P4 toolchain (PI, BMv2, p4c) built at pinned commits, resumably."""
