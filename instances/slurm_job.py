"""Deprecated name of the Slurm job's program: it is ``python -m providers.slurm.job`` now.

A job submitted before the providers left the instances app names this module in its batch script,
and Slurm may start it (from the queue, or requeued) after the console was upgraded: this runs the
program under its new name. Delete it once no such job can be left in a cluster's queue.
"""

import sys

from providers.slurm.job import main

if __name__ == "__main__":
    sys.exit(main())
