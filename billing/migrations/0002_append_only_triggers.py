"""On PostgreSQL, refuse UPDATE and DELETE on ledger rows at the database, whatever the client.

TRUNCATE stays possible: it is what test databases use to reset between transactional tests, and no
application code path issues it.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION billing_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'ledger rows are append-only (% on %)', TG_OP, TG_TABLE_NAME;
END;
$$ LANGUAGE plpgsql;
"""

TRIGGERS = [
    "CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
    "FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();",
]
TABLES = ["billing_transaction", "billing_entry"]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION, params=None)
    for table in TABLES:
        for trigger in TRIGGERS:
            schema_editor.execute(trigger.format(table=table))


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};")
    schema_editor.execute("DROP FUNCTION IF EXISTS billing_refuse_change();")


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_ledger")]
    operations = [migrations.RunPython(forwards, backwards)]
