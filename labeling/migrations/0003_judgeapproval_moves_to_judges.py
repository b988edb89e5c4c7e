"""The judge approval record moves to the judges app (``judges.JudgeApproval``): the table
is renamed, the rows stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0002_adjudication_calibrationitem_calibrationset_and_more"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterModelTable(name="judgeapproval", table="judges_judgeapproval"),
            ],
            state_operations=[migrations.DeleteModel(name="JudgeApproval")],
        ),
    ]
