"""The SSH gateway: one public SSH endpoint for the whole console (``ssh -p 2222 <instance>@host``).

It authenticates people with the SSH keys in their account (those chosen for the instance), then logs in
to the instance's own sshd with a per-instance key of its own (``gateway.keys``), so user keys never
leave the console. Shells, commands, subsystems (sftp, and scp over it) and local port forwarding are
passed through; on the simulated cloud a small built-in shell answers (``gateway.shell``). Every
connection is logged (``GatewaySession``). It runs as its own process: ``python -m gateway``.
"""
