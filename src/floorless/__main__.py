"""``python -m floorless``: the same as the ``floorless`` command."""

from floorless.cli import main

main()
