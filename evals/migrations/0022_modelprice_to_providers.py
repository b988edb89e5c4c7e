# ModelPrice moved to providers (providers 0001 holds it now, on the same table
# ``evals_modelprice``): removed from evals' migration state only, the table is kept.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0021_decision_transition_history"),
        ("providers", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ModelPrice"),
            ],
            database_operations=[],
        ),
    ]
