"""Capacity beyond the free cards: what is taken back, held, given back, grown and made good.

- ``takeback``: which interruptible instances an on-demand launch preempts, and a cluster's nodes in
  the fewest network blocks (``gang_reserve``);
- ``reservations``: cards staff hold for an account, lent to interruptible work meanwhile;
- ``preemption``: after a preemption, the grace period and checkpoint, power-off with the disk kept,
  the requeue when capacity returns;
- ``resize``: a running cluster grown or shrunk by whole nodes;
- ``incidents``: a service credit when a node fails under a running instance.

``takeback``, ``reservations`` and ``incidents`` sit below the services (placement and recovery call
them); ``preemption`` and ``resize`` sit above them (they start, stop and re-place instances): see the
instances-lifecycle contract in ``.importlinter``. This package imports none of them, so either side may
import its modules.
"""
