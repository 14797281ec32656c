# The simulated cloud's tables move here from the instances app, without moving: they were created by
# instances' migrations (0002, 0004, 0005) and keep their names, so this migration only tells Django's
# state that this app now holds them (instances 0010 tells it that instances no longer does). On a
# fresh database the tables come from instances' migrations, which this one depends on.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

MODELS = ("simulatednode", "simulatedmachine", "simulatedvolume")


def content_types_follow(apps, schema_editor):
    """The models' content types (and so their permissions) move with them, where they exist yet."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        if not ContentType.objects.using(db).filter(app_label="providers_simulated", model=model).exists():
            ContentType.objects.using(db).filter(app_label="instances", model=model).update(
                app_label="providers_simulated"
            )


def content_types_go_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        if not ContentType.objects.using(db).filter(app_label="instances", model=model).exists():
            ContentType.objects.using(db).filter(app_label="providers_simulated", model=model).update(
                app_label="instances"
            )


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        # The last of instances' migrations to shape these tables.
        ("instances", "0005_node_health_and_event_kind"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="SimulatedNode",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("backend_alias", models.CharField(max_length=32)),
                        ("name", models.CharField(max_length=96)),
                        ("region_slug", models.CharField(max_length=50)),
                        ("gpu_slug", models.CharField(max_length=50)),
                        ("cards", models.PositiveSmallIntegerField()),
                        ("is_lost", models.BooleanField(default=False)),
                        ("is_draining", models.BooleanField(default=False)),
                    ],
                    options={
                        "db_table": "instances_simulatednode",
                        "constraints": [
                            models.UniqueConstraint(fields=("backend_alias", "name"), name="instances_simnode_unique")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="SimulatedMachine",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("backend_alias", models.CharField(max_length=32)),
                        ("key", models.CharField(max_length=64)),
                        ("cards", models.PositiveSmallIntegerField()),
                        ("power", models.CharField(default="on", max_length=16)),
                        ("spec", models.JSONField(default=dict)),
                        ("ready_at", models.DateTimeField(null=True)),
                        ("last_active_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "node",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="machines",
                                to="providers_simulated.simulatednode",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "instances_simulatedmachine",
                        "constraints": [
                            models.UniqueConstraint(fields=("backend_alias", "key"), name="instances_simmachine_unique")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="SimulatedVolume",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("backend_alias", models.CharField(max_length=32)),
                        ("key", models.CharField(max_length=64)),
                        ("size_gb", models.PositiveIntegerField()),
                        ("used_bytes", models.BigIntegerField(default=0)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        "db_table": "instances_simulatedvolume",
                        "constraints": [
                            models.UniqueConstraint(fields=("backend_alias", "key"), name="instances_simvolume_unique")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_follow, content_types_go_back),
    ]
