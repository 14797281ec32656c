"""This host as a provider: ``backend.LocalBackend`` runs each instance's servers as processes here.

``runtime`` is what it drives (JupyterLab, code-server, sshd and an app per instance, this host's
GPUs and ports); it knows nothing of the console. The Slurm job runs the same runtime on its nodes
(``providers.slurm.job``), so the two providers' instances look alike to their owners.
"""
