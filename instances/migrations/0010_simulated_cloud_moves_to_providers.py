# The simulated cloud's tables now belong to the providers.simulated app (its 0001_initial), under the
# same names: only Django's state forgets them here; the database keeps the tables and their rows.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('instances', '0009_reasons_as_stored_messages'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='SimulatedMachine'),
                migrations.DeleteModel(name='SimulatedNode'),
                migrations.DeleteModel(name='SimulatedVolume'),
            ],
            database_operations=[],
        ),
    ]
