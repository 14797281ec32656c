"""The simulated cloud: a provider whose machines are rows in its own tables (``backend.SimulatedBackend``).

A Django app of its own (``providers.simulated``, label ``providers_simulated``) because its fleet
must be one cloud for every process of the console: web, worker and beat read and write the same
rows. Its tables were the instances app's until the providers moved out; they keep their names
(``instances_simulated*``), so no data moved (see ``migrations/0001_initial.py``).
"""
