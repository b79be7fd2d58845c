"""Before anything of a candidate runs: the static policy on its sources and its tables, the scans of native
sources and extension-compiling calls, self-timing signs, and what a candidate declares about itself."""
