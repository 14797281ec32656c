"""A Slurm cluster as a provider: ``backend.SlurmBackend`` submits a batch job per instance, and the
job (``python -m providers.slurm.job``) starts the instance's servers on the nodes Slurm gave it.

Nothing is imported here: the job imports this package on compute nodes, where it must not import
Django (see ``job``).
"""
