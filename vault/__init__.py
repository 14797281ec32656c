"""Secrets of a user or a team (``WANDB_API_KEY``, a model hub token): stored encrypted, shown by name
only, given to the instances their owner chooses at each boot. Named ``vault``: a package called
``secrets`` would shadow the standard library's module of that name."""
