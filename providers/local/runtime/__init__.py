"""The local runtime: one host's real user servers (JupyterLab, code-server, sshd) per instance.

It knows nothing of the console's models; ``providers.local.backend.LocalBackend`` wraps it in the
provisioning backend contract, and ``console.reverse_proxy`` reaches its servers through ``registry``.
"""
