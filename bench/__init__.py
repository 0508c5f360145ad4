"""The benchmark: floorless beside the spawn-per-page forge, cgit, gitweb and klaus."""
