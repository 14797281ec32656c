"""``python -m gpuctl``: the command line, as the ``gpuctl`` command runs it."""

from gpuctl.cli import main

main()
