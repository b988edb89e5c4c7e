# The price overrides' model moves from evals to providers. Its table stays
# ``evals_modelprice``, created by evals 0001: this migration creates the model in the
# migration state only; evals 0022 deletes it from evals' state. Its content type is
# relabelled, so the permissions and admin history attached to it follow the model.

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def content_type_relabel(
    apps: Apps, schema_editor: BaseDatabaseSchemaEditor, *, old: str, new: str
) -> None:
    """Relabel the model's content type from app ``old`` to ``new`` when only the old one
    exists (a fresh database has neither yet: they are made after migrating)."""
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if content_type.objects.using(db).filter(app_label=new, model="modelprice").exists():
        return
    content_type.objects.using(db).filter(app_label=old, model="modelprice").update(
        app_label=new
    )


def forwards(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    content_type_relabel(apps, schema_editor, old="evals", new="providers")


def backwards(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    content_type_relabel(apps, schema_editor, old="providers", new="evals")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("evals", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ModelPrice",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("model", models.CharField(max_length=200, unique=True)),
                        (
                            "input_usd_per_mtok",
                            models.DecimalField(decimal_places=6, max_digits=12),
                        ),
                        (
                            "output_usd_per_mtok",
                            models.DecimalField(decimal_places=6, max_digits=12),
                        ),
                        ("note", models.CharField(blank=True, max_length=200)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        "verbose_name": "model price (project override)",
                        "db_table": "evals_modelprice",
                        "ordering": ["model"],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
