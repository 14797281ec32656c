"""The instances app's verbs: launch, start, stop, restart, release, rename, auto-stop and sync.
Views, the API and Celery tasks all call these; nothing else changes an instance.

Every status change goes through ``instances.lifecycle.instance_transition`` (compare-and-set + event +
billing + live push, in one transaction); every verb starts with its guard, so running it twice does
nothing more. The operations that need the provider (stop, start, restart, release) are one table,
``OPERATIONS``: the request-time verb (``instance_stop``) moves the instance to the operation's busy
status and enqueues its task on commit; the task's verb (``instance_operation_execute``) talks to the
backend and finishes the move. The reconciler (``instances.reconciler``) repairs whatever a lost task
or a crashed worker left behind; GPU quota is ``instances.quota``.

One module per job, importing one way (``common`` at the bottom, so the split has no circle):

- ``common``: the operation table, the machine's spec, the instance as a task reads it, the money check;
- ``fleet``: the nodes each provider reports, their health;
- ``placement``: which node's cards a launch or a start takes;
- ``sync``: the provider's truth against ours, recovery, repair, operations that cannot finish;
- ``launch``: ``instance_launch(LaunchRequest(...))`` and the worker's ``instance_provision``;
- ``operations``: stop, start, restart, release, rename;
- ``autostop``: stop at a time or after idle minutes, with a warning first;
- ``images``: save an instance as an image of its account, rename, share and delete it;
- ``image_import``: bring your own image (inspected in a registry the operator allows);
- ``snapshots``: snapshots of an instance's disk (by hand, on a schedule), restore, delete;
- ``clone``: a new instance with another's image and a copy of its disk.

This package re-exports their public verbs, so callers (and tasks named by dotted path, such as
``instances.services.instance_operation_fail``) import from ``instances.services`` as before.
"""

from instances.services.autostop import (
    instance_auto_stop_set,
    instance_auto_stop_snooze,
    instances_auto_stop,
    instances_experiment_runs_refresh,
)
from instances.services.clone import instance_clone
from instances.services.common import OPERATIONS, Operation, app_launch_from, instance_hourly_price, node_count_choices
from instances.services.fleet import nodes_ensure, nodes_sync, region_nodes_sync
from instances.services.image_build import (
    build_limits,
    image_build,
    image_build_execute,
    image_build_fail,
    images_building_repair,
    recipe_check,
)
from instances.services.image_import import image_import, image_reference_parse, images_allowed_registries
from instances.services.images import (
    image_delete,
    image_registry_delete,
    image_rename,
    image_save,
    image_save_execute,
    image_save_fail,
    image_share,
    images_saving_repair,
)
from instances.services.launch import LaunchRequest, instance_launch, instance_provision
from instances.services.operations import (
    instance_operation_execute,
    instance_release,
    instance_rename,
    instance_restart,
    instance_secrets_set,
    instance_start,
    instance_stop,
    instances_stop_for_funds,
)
from instances.services.snapshots import (
    snapshot_create,
    snapshot_create_execute,
    snapshot_delete,
    snapshot_delete_execute,
    snapshot_fail,
    snapshot_restore,
    snapshot_restore_execute,
    snapshot_schedule_set,
    snapshots_scheduled,
    snapshots_supported,
)
from instances.services.sync import instance_abandon, instance_operation_fail, instance_sync

__all__ = [
    "OPERATIONS",
    "LaunchRequest",
    "Operation",
    "app_launch_from",
    "build_limits",
    "image_build",
    "image_build_execute",
    "image_build_fail",
    "image_delete",
    "image_import",
    "image_reference_parse",
    "image_registry_delete",
    "image_rename",
    "image_save",
    "image_save_execute",
    "image_save_fail",
    "image_share",
    "images_allowed_registries",
    "images_building_repair",
    "images_saving_repair",
    "instance_abandon",
    "instance_auto_stop_set",
    "instance_auto_stop_snooze",
    "instance_clone",
    "instance_hourly_price",
    "instance_launch",
    "instance_operation_execute",
    "instance_operation_fail",
    "instance_provision",
    "instance_release",
    "instance_rename",
    "instance_restart",
    "instance_secrets_set",
    "instance_start",
    "instance_stop",
    "instance_sync",
    "instances_auto_stop",
    "instances_experiment_runs_refresh",
    "instances_stop_for_funds",
    "node_count_choices",
    "nodes_ensure",
    "nodes_sync",
    "recipe_check",
    "region_nodes_sync",
    "snapshot_create",
    "snapshot_create_execute",
    "snapshot_delete",
    "snapshot_delete_execute",
    "snapshot_fail",
    "snapshot_restore",
    "snapshot_restore_execute",
    "snapshot_schedule_set",
    "snapshots_scheduled",
    "snapshots_supported",
]
